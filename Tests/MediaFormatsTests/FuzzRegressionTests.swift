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
}
