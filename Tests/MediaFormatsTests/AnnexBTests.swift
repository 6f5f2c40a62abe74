import Testing
import TestSupport
import MediaFormats

@Suite struct AnnexBTests {
    @Test func splitsOnThreeAndFourByteStartCodes() {
        let a: [UInt8] = [0x40, 0x01, 0x0C]
        let b: [UInt8] = [0x42, 0x01, 0x01, 0x60]
        let c: [UInt8] = [0x26, 0x01, 0xAF, 0x00, 0x03, 0x05]
        // Garbage and leading zeros, 4-byte code, 3-byte code with trailing zeros before it, 4-byte code.
        let stream: [UInt8] = [0x77, 0x00, 0x00, 0x00, 0x01] + a + [0x00, 0x00, 0x01] + b + [0x00, 0x00]
            + [0x00, 0x00, 0x00, 0x01] + c + [0x00]
        let units = AnnexB.nalUnits(in: stream).map(Array.init)
        #expect(units == [a, b, c])
        #expect(AnnexB.nalUnits(in: [0x00, 0x00, 0x01, 0x00, 0x00, 0x01]).isEmpty)
        #expect(AnnexB.nalUnits(in: [1, 2, 3]).isEmpty)
        #expect(AnnexB.nalUnits(in: []).isEmpty)
    }

    /// Three access units: IDR with parameter sets and two slices, P with AUD and suffix SEI, P with two slices.
    static func sampleStream() -> (stream: [UInt8], expected: [AccessUnit]) {
        let vps = makeNAL(type: 32, size: 24)
        let sps = makeNAL(type: 33, size: 40)
        let pps = makeNAL(type: 34, size: 8)
        let sei = makeNAL(type: 39, size: 12)
        let idr1 = makeNAL(type: 19, size: 300, firstSlice: true)
        let idr2 = makeNAL(type: 19, size: 200, firstSlice: false)
        let aud = makeNAL(type: 35, size: 3)
        let p1 = makeNAL(type: 1, size: 120, firstSlice: true, fill: 7)
        let suffix = makeNAL(type: 40, size: 9)
        let p2a = makeNAL(type: 1, size: 90, firstSlice: true, fill: 9)
        let p2b = makeNAL(type: 1, size: 95, firstSlice: false, fill: 11)
        let expected = [
            AccessUnit(nalUnits: [vps, sps, pps, sei, idr1, idr2], timestamp: 0, isKeyframe: true),
            AccessUnit(nalUnits: [aud, p1, suffix], timestamp: 0, isKeyframe: false),
            AccessUnit(nalUnits: [p2a, p2b], timestamp: 0, isKeyframe: false),
        ]
        var stream: [UInt8] = []
        for (index, nal) in expected.flatMap(\.nalUnits).enumerated() {
            stream += index % 2 == 0 ? [0, 0, 0, 1] : [0, 0, 1]
            stream += nal
        }
        return (stream, expected)
    }

    @Test func splitsAccessUnitsWholeBuffer() {
        let (stream, expected) = Self.sampleStream()
        var splitter = AnnexBAccessUnitSplitter()
        var out = splitter.append(stream)
        #expect(out == Array(expected.prefix(2)))  // the last one needs the end of stream
        out += splitter.finish()
        #expect(out == expected)
        #expect(splitter.counters.accessUnits == 3 && splitter.counters.nalUnits == 11)
        #expect(splitter.counters.garbageBytes == 0 && splitter.counters.oversizedAccessUnits == 0)
    }

    @Test(arguments: [1, 2, 3, 7, 64])
    func chunkedFeedingMatchesWholeBuffer(chunk: Int) {
        let (stream, expected) = Self.sampleStream()
        var splitter = AnnexBAccessUnitSplitter()
        var out: [AccessUnit] = []
        var offset = 0
        while offset < stream.count {
            let end = min(offset + chunk, stream.count)
            out += Array(stream[offset..<end]).withUnsafeBytes { splitter.append($0) }
            offset = end
        }
        out += splitter.finish()
        #expect(out == expected)
    }

    /// Up to 30 NAL units of random types and sizes behind three- and four-byte start codes,
    /// some with first_slice_segment_in_pic_flag clear, some with a trailing zero byte.
    static func randomStream(using rng: inout SplitMix64) -> [UInt8] {
        var stream: [UInt8] = Array(repeating: 0, count: Int.random(in: 0...3, using: &rng))
        for _ in 0..<Int.random(in: 1...30, using: &rng) {
            stream += Bool.random(using: &rng) ? [0, 0, 1] : [0, 0, 0, 1]
            let types: [UInt8] = [1, 1, 1, 19, 32, 33, 34, 35, 39, 40, 0]
            let type = types.randomElement(using: &rng)!
            var nal = randomNAL(type: type, size: Int.random(in: 2...400, using: &rng), using: &rng)
            if nal.count > 2 && Bool.random(using: &rng) { nal[2] &= 0x7f; if nal[2] == 0 { nal[2] = 1 } }
            stream += nal
            if Int.random(in: 0..<5, using: &rng) == 0 { stream += [0] }  // trailing zero
        }
        return stream
    }

    /// `stream` split by a splitter fed pieces of 1 – `longestPiece` bytes (cut at random), as
    /// arrays of their own or, `sharing`, as slices at an offset of larger arrays (so their
    /// indices do not start at 0).
    static func split(_ stream: [UInt8], limit: Int, longestPiece: Int, sharing: Bool,
                      using rng: inout SplitMix64) -> (units: [AccessUnit], counters: AnnexBSplitterCounters) {
        var splitter = AnnexBAccessUnitSplitter(maxAccessUnitSize: limit)
        var units: [AccessUnit] = []
        var offset = 0
        while offset < stream.count {
            let end = min(stream.count, offset + Int.random(in: 1...longestPiece, using: &rng))
            if sharing {
                let padded = [0x55, 0x55, 0x55] + stream[offset..<end] + [0x66]
                units += splitter.append(sharing: padded[3..<(3 + end - offset)])
            } else {
                units += splitter.append(Array(stream[offset..<end]))
            }
            offset = end
        }
        units += splitter.finish()
        return (units, splitter.counters)
    }

    @Test func randomChunkingAndRandomStreamsMatchWholeBuffer() {
        var rng = SplitMix64(seed: 42)
        for round in 0..<40 {
            let stream = Self.randomStream(using: &rng)
            let limit = round % 4 == 0 ? 700 : 16 << 20
            var whole = AnnexBAccessUnitSplitter(maxAccessUnitSize: limit)
            let wholeOut = whole.append(stream) + whole.finish()
            let chunked = Self.split(stream, limit: limit, longestPiece: 50, sharing: false, using: &rng)
            #expect(chunked.units == wholeOut, "round \(round)")
            #expect(chunked.counters == whole.counters, "round \(round)")
            #expect(wholeOut.allSatisfy { $0.byteCount <= limit })
        }
    }

    /// Chunks fed with `append(sharing:)` split as the same bytes fed as copies do: the same
    /// access units, NAL units and counters, for random streams cut at the same random places
    /// (pieces up to 700 bytes: most NAL units lie wholly in one, some cross a cut, as do
    /// some start codes).
    @Test func sharedChunksSplitAsCopiedChunks() {
        var rng = SplitMix64(seed: 7)
        for round in 0..<40 {
            let stream = Self.randomStream(using: &rng)
            let limit = round % 4 == 0 ? 700 : 16 << 20
            var sameCuts = rng
            let copied = Self.split(stream, limit: limit, longestPiece: 700, sharing: false, using: &rng)
            let shared = Self.split(stream, limit: limit, longestPiece: 700, sharing: true, using: &sameCuts)
            #expect(shared.units == copied.units, "round \(round)")
            #expect(shared.units.map(\.nalUnits) == copied.units.map(\.nalUnits), "round \(round)")
            #expect(shared.counters == copied.counters, "round \(round)")
        }
    }

    /// A NAL unit that lies wholly in a chunk fed with `append(sharing:)` is a slice of the
    /// chunk's storage, not a copy; one that crosses into the next chunk is a copy. Both hold
    /// the stream's bytes.
    @Test func nalUnitsWhollyInASharedChunkAreSlicesOfIt() {
        let (stream, expected) = Self.sampleStream()
        let cut = stream.count / 2
        let first = [0x55] + stream[..<cut]
        let second = [0x55, 0x55] + stream[cut...]
        var splitter = AnnexBAccessUnitSplitter()
        let units = splitter.append(sharing: first[1...]) + splitter.append(sharing: second[2...]) + splitter.finish()
        #expect(units == expected)
        #expect(units.flatMap(\.nalUnits) == expected.flatMap(\.nalUnits))
        func lies(_ nal: ArraySlice<UInt8>, in chunk: [UInt8]) -> Bool {
            nal.withUnsafeBufferPointer { nalBytes in
                chunk.withUnsafeBufferPointer { nalBytes.baseAddress! >= $0.baseAddress! && nalBytes.baseAddress! < $0.baseAddress! + $0.count }
            }
        }
        // The stream's offset of each NAL unit: it ends in the first chunk, or begins in the second.
        var searchFrom = 0
        var inFirst = 0
        var inSecond = 0
        for nal in units.flatMap(\.nalUnitSlices) {
            let start = (searchFrom...).first { stream[$0..<($0 + nal.count)].elementsEqual(nal) }!
            searchFrom = start + nal.count
            if start + nal.count <= cut {
                #expect(lies(nal, in: first))
                inFirst += 1
            } else if start >= cut {
                // Copied only at the end of the stream (the last NAL unit waits for `finish()`).
                #expect(lies(nal, in: second) || start + nal.count == stream.count)
                inSecond += 1
            } else {
                #expect(!lies(nal, in: first) && !lies(nal, in: second))
            }
        }
        #expect(inFirst > 0 && inSecond > 0)
    }

    /// Short streams with what a cut between reads can fall into: three- and four-byte start
    /// codes, zero bytes at both ends, trailing zeros before a start code, a start code as the
    /// last bytes, runs of zeros, no start code at all, an access unit over the size limit.
    static func edgeStreams() -> [(name: String, stream: [UInt8], limit: Int)] {
        let idr = makeNAL(type: 19, size: 9, firstSlice: true)
        let p1 = makeNAL(type: 1, size: 5, firstSlice: true, fill: 3)
        let p2 = makeNAL(type: 1, size: 4, firstSlice: false, fill: 5)
        let p3 = makeNAL(type: 1, size: 6, firstSlice: true, fill: 9)
        let vps = makeNAL(type: 32, size: 3)
        let big = makeNAL(type: 1, size: 40, firstSlice: true, fill: 1)
        return [
            ("3- and 4-byte codes, zeros at both ends", [0, 0] + [0, 0, 1] + vps + [0, 0, 0, 1] + idr
                + [0, 0, 1] + p1 + [0, 0, 0, 1] + p2 + [0, 0, 0], 1 << 20),
            ("trailing zeros before start codes", [0, 0, 0, 1] + idr + [0, 0, 0, 0] + [0, 0, 1] + p1 + [0]
                + [0, 0, 0, 1] + p3, 1 << 20),
            ("start code as the last bytes", [0, 0, 1] + idr + [0, 0, 1] + p1 + [0, 0, 0, 1], 1 << 20),
            ("garbage, then empty NAL units", [7, 0, 9, 0, 0] + [0, 0, 1, 0, 0, 1] + idr + [0, 0, 1, 0, 0, 0, 1]
                + p1, 1 << 20),
            ("no start code", [5, 6, 0, 0, 7, 0, 0, 2, 0, 0, 0, 3, 1, 0], 1 << 20),
            ("an access unit over the limit", [0, 0, 1] + p1 + [0, 0, 1] + big + [0, 0, 0, 1] + p3 + [0, 0, 1]
                + p2, 30),
        ]
    }

    /// Split from what was read and only the tail kept between reads: every cut of each edge
    /// stream into two reads, and into three, gives the whole buffer's access units and counters.
    @Test func everyCutBetweenReadsMatchesWholeBuffer() {
        for (name, stream, limit) in Self.edgeStreams() {
            var whole = AnnexBAccessUnitSplitter(maxAccessUnitSize: limit)
            let wholeOut = whole.append(stream) + whole.finish()
            for first in 0...stream.count {
                for second in first...stream.count {
                    var splitter = AnnexBAccessUnitSplitter(maxAccessUnitSize: limit)
                    let out = splitter.append(Array(stream[..<first])) + splitter.append(Array(stream[first..<second]))
                        + splitter.append(Array(stream[second...])) + splitter.finish()
                    #expect(out == wholeOut, "\(name): cut at \(first), \(second)")
                    #expect(splitter.counters == whole.counters, "\(name): cut at \(first), \(second)")
                }
            }
        }
    }

    /// What the edge streams split into, written out.
    @Test func edgeStreamsSplitAsWritten() {
        let streams = Self.edgeStreams()
        let idr = makeNAL(type: 19, size: 9, firstSlice: true)
        let p1 = makeNAL(type: 1, size: 5, firstSlice: true, fill: 3)
        let p2 = makeNAL(type: 1, size: 4, firstSlice: false, fill: 5)
        let p3 = makeNAL(type: 1, size: 6, firstSlice: true, fill: 9)
        let vps = makeNAL(type: 32, size: 3)
        let expected: [[[UInt8]]] = [[vps, idr], [p1, p2]]
        func split(_ index: Int) -> (units: [[[UInt8]]], counters: AnnexBSplitterCounters) {
            var splitter = AnnexBAccessUnitSplitter(maxAccessUnitSize: streams[index].limit)
            let out = splitter.append(streams[index].stream) + splitter.finish()
            return (out.map(\.nalUnits), splitter.counters)
        }
        #expect(split(0).units == expected)
        #expect(split(1).units == [[idr], [p1], [p3]])
        #expect(split(2).units == [[idr], [p1]])
        let garbage = split(3)
        #expect(garbage.units == [[idr], [p1]])
        #expect(garbage.counters.garbageBytes == 2)
        let none = split(4)
        #expect(none.units.isEmpty)
        #expect(none.counters.garbageBytes == 6)
        let oversized = split(5)
        #expect(oversized.units == [[p1], [p3, p2]])
        #expect(oversized.counters.oversizedAccessUnits == 1)
    }

    @Test func oversizedAccessUnitIsDroppedAndCounted() {
        let small = makeNAL(type: 1, size: 50, firstSlice: true, fill: 1)
        let big = makeNAL(type: 19, size: 5000, firstSlice: true, fill: 2)
        let after = makeNAL(type: 1, size: 60, firstSlice: true, fill: 3)
        let trailing = makeNAL(type: 1, size: 70, firstSlice: false, fill: 4)
        var stream: [UInt8] = []
        for nal in [small, big, trailing, after] { stream += [0, 0, 0, 1] + nal }
        for chunk in [1, 13, stream.count] {
            var splitter = AnnexBAccessUnitSplitter(maxAccessUnitSize: 1000)
            var out: [AccessUnit] = []
            var offset = 0
            while offset < stream.count {
                let end = min(offset + chunk, stream.count)
                out += splitter.append(Array(stream[offset..<end]))
                offset = end
            }
            out += splitter.finish()
            #expect(out.map(\.nalUnits) == [[small], [after]], "chunk \(chunk)")
            #expect(splitter.counters.oversizedAccessUnits == 1)
            #expect(splitter.counters.skippedNALUnits == 1)  // the rest of the dropped picture
        }
    }

    @Test func garbageWithoutStartCodesIsCountedAndBounded() {
        var splitter = AnnexBAccessUnitSplitter(maxAccessUnitSize: 4096)
        var rng = SplitMix64(seed: 3)
        for _ in 0..<200 {
            let chunk = (0..<1000).map { _ in UInt8.random(in: 2...255, using: &rng) }
            #expect(splitter.append(chunk).isEmpty)
        }
        #expect(splitter.counters.garbageBytes >= 199_998)
        let nal = makeNAL(type: 19, size: 30)
        let out = splitter.append([0, 0, 1] + nal) + splitter.finish()
        #expect(out.map(\.nalUnits) == [[nal]])
        #expect(splitter.counters.garbageBytes == 200_000)
    }

    @Test func invalidNALUnitsAreSkipped() {
        let good = makeNAL(type: 1, size: 10)
        let stream: [UInt8] = [0, 0, 1, 0x80 | 2, 1, 5] + [0, 0, 1, 0x02] + [0, 0, 1] + good
        var splitter = AnnexBAccessUnitSplitter()
        let out = splitter.append(stream) + splitter.finish()
        #expect(out.map(\.nalUnits) == [[good]])
        #expect(splitter.counters.invalidNALUnits == 2)
    }

    /// The start-code search tests 32 positions at a time: against a byte-by-byte reference, on
    /// streams dense in 00 and 01 bytes (start codes at every alignment, across word edges,
    /// at the very start and end), every NAL unit comes out the same.
    @Test func wordAtATimeSearchMatchesByteByByte() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<200 {
            for _ in 0..<20 {
                let bytes = (0..<length).map { _ -> UInt8 in
                    let pick = UInt8.random(in: 0..<8, using: &generator)
                    return pick < 4 ? 0 : pick < 6 ? 1 : UInt8.random(in: 2...255, using: &generator)
                }
                #expect(AnnexB.nalUnits(in: bytes).map(Array.init) == Self.referenceNALUnits(bytes))
            }
        }
    }

    private static func referenceNALUnits(_ bytes: [UInt8]) -> [[UInt8]] {
        var starts: [Int] = []
        var index = 0
        while index + 2 < bytes.count {
            if bytes[index] == 0 && bytes[index + 1] == 0 && bytes[index + 2] == 1 {
                starts.append(index)
                index += 3
            } else {
                index += 1
            }
        }
        var units: [[UInt8]] = []
        for (number, start) in starts.enumerated() {
            var end = number + 1 < starts.count ? starts[number + 1] : bytes.count
            while end > start + 3 && bytes[end - 1] == 0 { end -= 1 }
            if end > start + 3 { units.append(Array(bytes[(start + 3)..<end])) }
        }
        return units
    }
}
