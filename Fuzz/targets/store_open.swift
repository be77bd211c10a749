import CairnTesting

/// libFuzzer target: store_open (see Fuzz/README.md).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzEntry(rawValue: "store_open")!.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
