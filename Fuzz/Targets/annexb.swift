// Fuzz target: AnnexBAccessUnitSplitter fed in chunks whose sizes come from the input.
//
// The first bytes choose maxAccessUnitSize (small, to reach the oversize path) and a chunk
// size seed; the rest is the Annex B stream. Fed whole and fed in chunks, the splitter must
// return the same access units and the same counters. Every access unit must be within
// maxAccessUnitSize and hold a picture; every NAL unit must be valid (header, no start code,
// no trailing zero byte).

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let limitByte = input.byte()
    let maxAccessUnitSize = limitByte & 0x80 != 0 ? 16 << 20 : 1 + Int(limitByte) * 32 + Int(input.byte())
    var chunkSeed = UInt64(input.uint32()) | 1
    let stream = input.rest()

    var whole = AnnexBAccessUnitSplitter(maxAccessUnitSize: maxAccessUnitSize)
    var wholeUnits = whole.append(stream)
    wholeUnits += whole.finish()

    var chunked = AnnexBAccessUnitSplitter(maxAccessUnitSize: maxAccessUnitSize)
    var chunkedUnits: [AccessUnit] = []
    var offset = 0
    while offset < stream.count {
        // xorshift: chunk sizes 0...63 mostly, sometimes up to 4095.
        chunkSeed ^= chunkSeed << 13
        chunkSeed ^= chunkSeed >> 7
        chunkSeed ^= chunkSeed << 17
        let length = chunkSeed & 0x700 == 0 ? Int(chunkSeed >> 20 & 0xFFF) : Int(chunkSeed >> 20 & 0x3F)
        let end = min(stream.count, offset + length)
        chunkedUnits += chunked.append(UnsafeRawBufferPointer(rebasing: stream[offset..<end]))
        offset = end
    }
    chunkedUnits += chunked.finish()

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
        let all = AnnexB.nalUnits(in: Array(stream))
        let returned = wholeUnits.flatMap(\.nalUnits)
        fuzzCheck(returned.count <= all.count, "more NAL units returned than the stream holds")
        fuzzCheck(whole.counters.nalUnits + whole.counters.invalidNALUnits == all.count,
                  "nalUnits \(whole.counters.nalUnits) + invalid \(whole.counters.invalidNALUnits) != \(all.count) in the stream")
    }
    return 0
}
