import CairnTesting

/// libFuzzer target: log (see Fuzz/README.md).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzEntry(rawValue: "log")!.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
