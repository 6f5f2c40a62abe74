// libFuzzer entry of the `rtsp` target: runs the oracle in Fuzz/Oracles/rtsp-oracle.swift
// on each input. tools/fuzz compiles it with that oracle, Fuzz/Support and Sources/MediaFormats.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzRTSP(UnsafeRawBufferPointer(start: size == 0 ? nil : data, count: size))
    return 0
}
