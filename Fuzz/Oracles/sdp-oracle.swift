// Fuzz oracle of the `sdp` target: Fuzz/Targets/sdp.swift runs it under libFuzzer, and
// Fuzz/Tests/FuzzCorpusReplayTests.swift replays Tests/FuzzCorpus/sdp through it in `swift test`.
//
// SDPSessionDescription(parsing:), its `.text` rendering and Base64.
//
// A description that parses must render to text that parses back to an equal description,
// and rendering that again must give the same text. The frame rate is compared as
// rendered (two decimals, documented), not exactly. Base64 gets a share of the input too:
// whatever decodes must encode back to the same text.

#if canImport(MediaFormats)  // in the test target (Fuzz/Tests); tools/fuzz compiles MediaFormats into the same module
@testable import MediaFormats
#endif

/// The sdp target's checks on one input; a violated invariant goes to `fuzzCheck`.
func fuzzSDP(_ bytes: UnsafeRawBufferPointer) {
    let text = String(decoding: bytes, as: UTF8.self)

    if let decoded = try? Base64.decode(text) {
        fuzzCheck(Base64.encode(decoded) == text, "base64 \(text) decodes to \(decoded), which encodes differently")
    }

    guard let description = try? SDPSessionDescription(parsing: text) else { return }
    let rendered = description.text
    let reparsed: SDPSessionDescription
    do {
        reparsed = try SDPSessionDescription(parsing: rendered)
    } catch {
        fuzzCheck(false, "rendered SDP does not parse (\(error)):\n\(rendered)")
        return
    }
    // a=framerate is documented as written with two decimals ("29.97"): compare against that.
    // An empty session name is written as "s=-" (RFC 8866 wants a non-empty s= line).
    var expected = description
    if expected.sessionName.isEmpty { expected.sessionName = "-" }
    expected.frameRate = description.frameRate.flatMap(SDPSessionDescription.format).flatMap(SDPSessionDescription.parseRate)
    fuzzCheck(reparsed == expected, "SDP round trip differs:\nparsed   \(description)\nreparsed \(reparsed)\nrendered:\n\(rendered)")
    fuzzCheck(reparsed.text == rendered, "rendering is not stable:\n\(rendered)\n---\n\(reparsed.text)")
}
