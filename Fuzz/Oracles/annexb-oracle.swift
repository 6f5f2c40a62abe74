// Fuzz oracle of the `annexb` target: Fuzz/Targets/annexb.swift runs it under libFuzzer, and
// Fuzz/Tests/FuzzCorpusReplayTests.swift replays Tests/FuzzCorpus/annexb through it in `swift test`.
//
// AnnexBAccessUnitSplitter fed in chunks whose sizes come from the input.
//
// The first bytes choose maxAccessUnitSize (small, to reach the oversize path) and a chunk
// size seed; the rest is the Annex B stream. Fed whole and fed in chunks, the splitter must
// return the same access units and the same counters. Every access unit must be within
// maxAccessUnitSize and hold a picture; every NAL unit must be valid (header, no start code,
// no trailing zero byte).

#if canImport(MediaFormats)  // in the test target (Fuzz/Tests); tools/fuzz compiles MediaFormats into the same module
@testable import MediaFormats
#endif

/// The annexb target's reading of an input: the splitter's size limit, and the stream split
/// whole and in chunks (sizes from a seed in the input).
struct AnnexBSplit {
    var maxAccessUnitSize: Int
    var stream: [UInt8]
    var whole: AnnexBAccessUnitSplitter
    var wholeUnits: [AccessUnit]
    var chunked: AnnexBAccessUnitSplitter
    var chunkedUnits: [AccessUnit]

    init(_ data: UnsafeRawBufferPointer) {
        var input = FuzzInput(data)
        let limitByte = input.byte()
        maxAccessUnitSize = limitByte & 0x80 != 0 ? 16 << 20 : 1 + Int(limitByte) * 32 + Int(input.byte())
        var chunkSeed = UInt64(input.uint32()) | 1
        stream = Array(input.rest())

        whole = AnnexBAccessUnitSplitter(maxAccessUnitSize: maxAccessUnitSize)
        wholeUnits = whole.append(stream)
        wholeUnits += whole.finish()

        chunked = AnnexBAccessUnitSplitter(maxAccessUnitSize: maxAccessUnitSize)
        chunkedUnits = []
        var offset = 0
        while offset < stream.count {
            // xorshift: chunk sizes 0...63 mostly, sometimes up to 4095.
            chunkSeed ^= chunkSeed << 13
            chunkSeed ^= chunkSeed >> 7
            chunkSeed ^= chunkSeed << 17
            let length = chunkSeed & 0x700 == 0 ? Int(chunkSeed >> 20 & 0xFFF) : Int(chunkSeed >> 20 & 0x3F)
            let end = min(stream.count, offset + length)
            chunkedUnits += chunked.append(Array(stream[offset..<end]))
            offset = end
        }
        chunkedUnits += chunked.finish()
    }
}

/// The annexb target's checks on one input; a violated invariant goes to `fuzzCheck`.
func fuzzAnnexB(_ data: UnsafeRawBufferPointer) {
    let split = AnnexBSplit(data)
    let (maxAccessUnitSize, stream, whole, wholeUnits, chunked, chunkedUnits) =
        (split.maxAccessUnitSize, split.stream, split.whole, split.wholeUnits, split.chunked, split.chunkedUnits)

    fuzzCheck(wholeUnits == chunkedUnits,
              "whole: \(wholeUnits.count) access units, chunked: \(chunkedUnits.count); they differ")
    fuzzCheck(whole.counters == chunked.counters, "counters whole \(whole.counters) chunked \(chunked.counters)")
    fuzzCheck(whole.counters.accessUnits == wholeUnits.count, "counters.accessUnits \(whole.counters.accessUnits), returned \(wholeUnits.count)")
    let nalCount = wholeUnits.reduce(0) { $0 + $1.nalUnits.count }
    fuzzCheck(nalCount <= whole.counters.nalUnits, "\(nalCount) NAL units returned, counters.nalUnits \(whole.counters.nalUnits)")
    for unit in wholeUnits {
        fuzzCheck(unit.byteCount <= maxAccessUnitSize, "access unit of \(unit.byteCount) bytes above \(maxAccessUnitSize)")
        fuzzCheck(!unit.nalUnits.isEmpty, "empty access unit")
        fuzzCheck(unit.nalUnits.contains { HEVCNALUnitType(rawValue: $0[0] >> 1).isVCL }, "access unit without a picture")
        fuzzCheck(unit.isKeyframe == unit.nalUnits.contains { HEVCNALUnitType(rawValue: $0[0] >> 1).isIRAP }, "isKeyframe wrong")
        for nal in unit.nalUnits {
            fuzzCheck(nal.count >= 2 && nal[0] & 0x80 == 0 && nal[1] & 0x07 != 0, "invalid NAL unit header \(nal.prefix(2))")
            fuzzCheck(nal.last != 0, "NAL unit ends in a zero byte")
            fuzzCheck(AnnexB.nextStartCode(in: nal, from: 0) == nil, "NAL unit contains a start code")
        }
    }
    // Without the size limit, the NAL units are those AnnexB.nalUnits finds, minus invalid and skipped ones.
    if maxAccessUnitSize == 16 << 20 {
        let all = AnnexB.nalUnits(in: stream)
        let returned = wholeUnits.flatMap(\.nalUnits)
        fuzzCheck(returned.count <= all.count, "more NAL units returned than the stream holds")
        fuzzCheck(whole.counters.nalUnits + whole.counters.invalidNALUnits == all.count,
                  "nalUnits \(whole.counters.nalUnits) + invalid \(whole.counters.invalidNALUnits) != \(all.count) in the stream")
    }
}
