// libFuzzer entry of the `rtp-depacketizer` target: runs the oracle in Fuzz/Oracles/rtp-depacketizer-oracle.swift
// on each input. tools/fuzz compiles it with that oracle, Fuzz/Support and Sources/MediaFormats.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzRTPDepacketizer(UnsafeRawBufferPointer(start: size == 0 ? nil : data, count: size))
    return 0
}
