// Fuzz target: SDPSessionDescription(parsing:), its `.text` rendering and Base64.
//
// A description that parses must render to text that parses back to an equal description,
// and rendering that again must give the same text. The frame rate is compared as
// rendered (two decimals, documented), not exactly. Base64 gets a share of the input too:
// whatever decodes must encode back to the same text.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: size == 0 ? nil : data, count: size)
    let text = String(decoding: bytes, as: UTF8.self)

    if let decoded = try? Base64.decode(text) {
        fuzzCheck(Base64.encode(decoded) == text, "base64 \(text) decodes to \(decoded), which encodes differently")
    }

    guard let description = try? SDPSessionDescription(parsing: text) else { return 0 }
    let rendered = description.text
    let reparsed: SDPSessionDescription
    do {
        reparsed = try SDPSessionDescription(parsing: rendered)
    } catch {
        fatalError("fuzz invariant violated: rendered SDP does not parse (\(error)):\n\(rendered)")
    }
    // a=framerate is documented as written with two decimals ("29.97"): compare against that.
    // An empty session name is written as "s=-" (RFC 8866 wants a non-empty s= line).
    var expected = description
    if expected.sessionName.isEmpty { expected.sessionName = "-" }
    expected.frameRate = description.frameRate.flatMap(SDPSessionDescription.format).flatMap(SDPSessionDescription.parseRate)
    fuzzCheck(reparsed == expected, "SDP round trip differs:\nparsed   \(description)\nreparsed \(reparsed)\nrendered:\n\(rendered)")
    fuzzCheck(reparsed.text == rendered, "rendering is not stable:\n\(rendered)\n---\n\(reparsed.text)")
    return 0
}
