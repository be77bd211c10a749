import CairnTesting

/// libFuzzer target: context_ops (see Fuzz/README.md).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzEntry(rawValue: "context_ops")!.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
