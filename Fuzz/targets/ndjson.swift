import CairnTesting

/// libFuzzer target: ndjson (see Fuzz/README.md).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    FuzzEntry(rawValue: "ndjson")!.run(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}
