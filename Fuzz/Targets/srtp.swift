// libFuzzer entry of the `srtp` target: runs the oracle in Fuzz/Oracles/srtp-oracle.swift on
// each input. tools/fuzz compiles it with that oracle, Fuzz/Support, Sources/MediaFormats and
// Sources/SecureRTP (libsrtp2 through Sources/CSRTP).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzSRTP(UnsafeRawBufferPointer(start: size == 0 ? nil : data, count: size))
    return 0
}
