import Testing
@testable import MediaFormats

/// Inputs found by tools/fuzz, replayed through the code path of the fuzz target that found
/// them (Fuzz/Targets/<target>.swift). Each is also kept in Tests/FuzzCorpus/<target>/.
@Suite struct FuzzRegressionTests {
    /// The annexb target's decoding of an input: size limit, chunk seed, stream.
    static func annexBWholeAndChunked(_ input: [UInt8])
        -> (whole: [AccessUnit], wholeCounters: AnnexBSplitterCounters,
            chunked: [AccessUnit], chunkedCounters: AnnexBSplitterCounters)
    {
        var position = 0
        func byte() -> UInt8 {
            guard position < input.count else { return 0 }
            defer { position += 1 }
            return input[position]
        }
        let limitByte = byte()
        let limit = limitByte & 0x80 != 0 ? 16 << 20 : 1 + Int(limitByte) * 32 + Int(byte())
        var seed = UInt64(UInt32(byte()) << 24 | UInt32(byte()) << 16 | UInt32(byte()) << 8 | UInt32(byte())) | 1
        let stream = Array(input[min(position, input.count)...])

        var whole = AnnexBAccessUnitSplitter(maxAccessUnitSize: limit)
        let wholeUnits = whole.append(stream) + whole.finish()
        var chunked = AnnexBAccessUnitSplitter(maxAccessUnitSize: limit)
        var chunkedUnits: [AccessUnit] = []
        var offset = 0
        while offset < stream.count {
            seed ^= seed << 13
            seed ^= seed >> 7
            seed ^= seed << 17
            let length = seed & 0x700 == 0 ? Int(seed >> 20 & 0xFFF) : Int(seed >> 20 & 0x3F)
            let end = min(stream.count, offset + length)
            chunkedUnits += chunked.append(Array(stream[offset..<end]))
            offset = end
        }
        chunkedUnits += chunked.finish()
        return (wholeUnits, whole.counters, chunkedUnits, chunked.counters)
    }

    /// A run of zero bytes after a start code, longer than maxAccessUnitSize, was counted as
    /// an invalid NAL unit when it arrived in chunks, but is an empty NAL unit (not counted)
    /// when the stream is split whole. Fuzz input annexb-1.
    @Test func annexBZeroRunLongerThanLimitIsNotInvalidWhenChunked() {
        let input: [UInt8] = [
            0x00, 0x00, 0x1e, 0x00, 0x25, 0x18, 0x18, 0x18, 0x00, 0x00, 0x9e, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x28, 0x00, 0x00, 0x01, 0x00, 0x1e, 0x28, 0x00, 0x1e,
        ]
        let result = Self.annexBWholeAndChunked(input)
        #expect(result.chunked == result.whole)
        #expect(result.chunkedCounters == result.wholeCounters)
        #expect(result.wholeCounters.invalidNALUnits == 1)

        // The same defect by hand: limit 1, ten zeros between two start codes, fed byte by byte.
        let stream: [UInt8] = [0, 0, 1] + [UInt8](repeating: 0, count: 10) + [0, 0, 1, 0x26, 0x01, 0xAF, 0x05]
        var whole = AnnexBAccessUnitSplitter(maxAccessUnitSize: 1)
        _ = whole.append(stream) + whole.finish()
        var bytewise = AnnexBAccessUnitSplitter(maxAccessUnitSize: 1)
        for byte in stream { _ = bytewise.append([byte]) }
        _ = bytewise.finish()
        #expect(bytewise.counters == whole.counters)
        #expect(bytewise.counters.invalidNALUnits == 0)

        // Zeros first, then a non-zero byte: one invalid NAL unit, however it is fed.
        let invalid: [UInt8] = [0, 0, 1] + [UInt8](repeating: 0, count: 10) + [0x07, 0x09] + [0, 0, 1, 0x26, 0x01, 0xAF, 0x05]
        var invalidWhole = AnnexBAccessUnitSplitter(maxAccessUnitSize: 1)
        _ = invalidWhole.append(invalid) + invalidWhole.finish()
        var invalidBytewise = AnnexBAccessUnitSplitter(maxAccessUnitSize: 1)
        for byte in invalid { _ = invalidBytewise.append([byte]) }
        _ = invalidBytewise.finish()
        #expect(invalidWhole.counters.invalidNALUnits == 1)
        #expect(invalidBytewise.counters == invalidWhole.counters)
    }

    /// The sdp target's check: what parses must render to text that parses back equal.
    static func sdpRoundTrips(_ input: [UInt8]) -> Bool {
        guard let parsed = try? SDPSessionDescription(parsing: String(decoding: input, as: UTF8.self)) else { return true }
        guard let reparsed = try? SDPSessionDescription(parsing: parsed.text) else { return false }
        return reparsed == parsed && reparsed.text == parsed.text
    }

    /// A bare CR inside an a=rtpmap value was accepted, and rendered as a space: the round
    /// trip changed the encoding name. RFC 8866 text excludes CR; such a line is now rejected.
    /// Fuzz input sdp-1.
    @Test func sdpBareCarriageReturnInsideALineIsRejected() {
        let input: [UInt8] = [
            0x76, 0x3d, 0x30, 0x0d, 0x0a, 0x6f, 0x3d, 0x2d, 0x20, 0x30, 0x20, 0x30, 0x20, 0x49, 0x4e, 0x20, 0x49, 0x50,
            0x34, 0x20, 0x31, 0x32, 0x37, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x31, 0x0d, 0x0a, 0x73, 0x3d, 0x73, 0x74, 0x72,
            0x65, 0x61, 0x6d, 0x65, 0x72, 0x0d, 0x0a, 0x63, 0x3d, 0x49, 0x4e, 0x20, 0x49, 0x50, 0x36, 0x20, 0x66, 0x64,
            0x37, 0x37, 0x3a, 0x32, 0x3a, 0x3a, 0x32, 0x0d, 0x0a, 0x74, 0x3d, 0x30, 0x20, 0x30, 0x0d, 0x0a, 0x6d, 0x3d,
            0x76, 0x69, 0x64, 0x65, 0x6f, 0x20, 0x36, 0x30, 0x30, 0x30, 0x20, 0x52, 0x54, 0x50, 0x2f, 0x41, 0x56, 0x50,
            0x20, 0x39, 0x37, 0x0d, 0x0a, 0x61, 0x3d, 0x72, 0x74, 0x70, 0x6d, 0x61, 0x70, 0x3a, 0x39, 0x37, 0x20, 0x48,
            0x32, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3d, 0x30, 0x20, 0x30, 0x0d, 0x41, 0x72, 0x72, 0x61,
            0x79, 0x2f, 0x39, 0x30, 0x30, 0x30, 0x30, 0x0d, 0x0a, 0x61, 0x3d, 0x72, 0x74, 0x63, 0x70, 0x2d, 0x6d, 0x75,
            0x78, 0x0d, 0x0a, 0x61, 0x3d, 0x66, 0x72, 0x61, 0x6d, 0x65, 0x72, 0x61, 0x74, 0x65, 0x3a, 0x32, 0x35, 0x0d,
            0x0a,
        ]
        #expect(Self.sdpRoundTrips(input))
        #expect(throws: SDPError.self) { try SDPSessionDescription(parsing: String(decoding: input, as: UTF8.self)) }
        let bare = "v=0\r\nc=IN IP4 1.2.3.4\r\nm=video 1 RTP/AVP 96\r\ns=a\rb\r\n"
        #expect(throws: SDPError("sdp: line 4: CR inside a line")) { try SDPSessionDescription(parsing: bare) }
        // CRLF and LF endings still parse.
        #expect((try? SDPSessionDescription(parsing: "v=0\nc=IN IP4 1.2.3.4\r\nm=video 1 RTP/AVP 96\n"))?.port == 1)
    }
}
