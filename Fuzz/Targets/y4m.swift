// libFuzzer entry of the `y4m` target: runs the oracle in Fuzz/Oracles/y4m-oracle.swift
// on each input. tools/fuzz compiles it with that oracle, Fuzz/Support and Sources/MediaFormats.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzY4M(UnsafeRawBufferPointer(start: size == 0 ? nil : data, count: size))
    return 0
}
