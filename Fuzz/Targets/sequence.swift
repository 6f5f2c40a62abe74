// libFuzzer entry of the `sequence` target: runs the oracle in Fuzz/Oracles/sequence-oracle.swift
// on each input. tools/fuzz compiles it with that oracle, Fuzz/Support and Sources/MediaFormats.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzSequence(UnsafeRawBufferPointer(start: size == 0 ? nil : data, count: size))
    return 0
}
