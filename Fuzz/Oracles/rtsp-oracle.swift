// Fuzz oracle of the `rtsp` target: Fuzz/Targets/rtsp.swift runs it under libFuzzer, and
// Fuzz/Tests/FuzzCorpusReplayTests.swift replays Tests/FuzzCorpus/rtsp through it in `swift test`.
//
// RTSPRequest.parse (what any TCP client can send to `streamer send --rtsp`),
// RTSPTransport.parseList on what it yields, and RTSPResponse rendering.
//
// Invariants: a parsed request took at least one byte and no more than it was given; the
// bytes after it never change it (a request does not depend on what follows); every strict
// prefix of it asks for more bytes instead of yielding a request; its Transport header parses
// or is refused without a crash; and an answer to it renders.

#if canImport(MediaFormats)  // in the test target (Fuzz/Tests); tools/fuzz compiles MediaFormats into the same module
@testable import MediaFormats
#endif

/// The rtsp target's checks on one input; a violated invariant goes to `fuzzCheck`.
func fuzzRTSP(_ data: UnsafeRawBufferPointer) {
    let bytes = Array(data)
    var limits = RTSPLimits()
    limits.maxHeaderBytes = 2048  // small limits so the fuzzer reaches them
    limits.maxLineLength = 512
    limits.maxHeaderCount = 16
    limits.maxBodyBytes = 256
    let parsed: (request: RTSPRequest, consumed: Int)?
    do {
        parsed = try RTSPRequest.parse(bytes[...], limits: limits)
    } catch {
        fuzzCheck((400...599).contains(error.status), "an error status outside 4xx/5xx: \(error)")
        return
    }
    guard let (request, consumed) = parsed else { return }
    fuzzCheck(consumed > 0 && consumed <= bytes.count, "consumed \(consumed) of \(bytes.count)")

    // What follows the request does not change it.
    let followed = bytes[..<consumed] + Array("OPTIONS * RTSP/1.0\r\n".utf8)
    let again = try? RTSPRequest.parse(followed[...], limits: limits)
    fuzzCheck(again?.request == request && again?.consumed == consumed, "the request changed with the bytes after it")

    // Strict prefixes are incomplete, never a (different) request.
    for cut in Set([consumed - 1, consumed / 2, consumed / 3]) where cut >= 0 && cut < consumed {
        let early = try? RTSPRequest.parse(bytes[..<cut], limits: limits)
        fuzzCheck(early == nil, "a prefix of \(cut) bytes parsed as a request")
    }

    if let transport = request.header("Transport") { _ = try? RTSPTransport.parseList(transport) }
    let answer = RTSPResponse(status: 200, cseq: request.cseq, headers: [("Public", "OPTIONS")], body: request.body)
    fuzzCheck(!answer.bytes.isEmpty, "an empty response")
}
