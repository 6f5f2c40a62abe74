import Testing
import TestSupport
import MediaFormats

/// An access unit made from slices of a shared buffer behaves as one made from arrays.
@Suite struct AccessUnitTests {
    @Test func slicesAndArraysGiveTheSameAccessUnit() {
        let vps = makeNAL(type: 32, size: 24)
        let sps = makeNAL(type: 33, size: 40)
        let pps = makeNAL(type: 34, size: 8)
        let slice = makeNAL(type: 19, size: 300)
        let nals = [vps, sps, pps, slice]
        // The NAL units one after another in one buffer, at an offset (the slices' indices do not start at 0).
        let buffer = [0x11, 0x22, 0x33] + nals.joined()
        var starts: [Int] = []
        var start = 3
        for nal in nals {
            starts.append(start)
            start += nal.count
        }
        let slices = zip(starts, nals).map { buffer[$0..<($0 + $1.count)] }
        let fromArrays = AccessUnit(nalUnits: nals, timestamp: 3000, isKeyframe: true)
        var fromSlices = AccessUnit(nalUnitSlices: slices, timestamp: 3000, isKeyframe: true)
        #expect(fromSlices == fromArrays)
        #expect(fromSlices.nalUnits == nals)
        #expect(fromArrays.nalUnitSlices.map(Array.init) == nals)
        #expect(fromSlices.byteCount == 372 && fromArrays.byteCount == 372)
        #expect(fromSlices.parameterSets == [vps, sps, pps] && fromArrays.parameterSets == [vps, sps, pps])
        #expect(fromSlices.annexB == fromArrays.annexB)
        #expect(fromSlices.annexB == [0, 0, 0, 1] + vps + [0, 0, 0, 1] + sps + [0, 0, 0, 1] + pps + [0, 0, 0, 1] + slice)

        // Setting `nalUnits` replaces the slices and the byte count.
        fromSlices.nalUnits = [slice]
        #expect(fromSlices.nalUnitSlices.map(Array.init) == [slice] && fromSlices.byteCount == 300)
        #expect(fromSlices != fromArrays)
        #expect(fromSlices == AccessUnit(nalUnits: [slice], timestamp: 3000, isKeyframe: true))
        fromSlices.nalUnitSlices.append(buffer[3..<27])
        #expect(fromSlices.nalUnits == [slice, vps] && fromSlices.byteCount == 324)
    }
}
