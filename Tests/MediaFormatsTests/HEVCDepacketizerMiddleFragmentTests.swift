import MediaFormats
import Testing
import TestSupport

/// `HEVCDepacketizer.pushMiddleFragment` (a middle fragment of the NAL unit under assembly
/// taken with one check) against `push(_:payload:tracked:into:)` for every packet: the same
/// access units and counters on streams of fragmented NAL units with lost, swapped and damaged
/// packets, and access units larger than the limit.
@Suite struct HEVCDepacketizerMiddleFragmentTests {
    /// Packets of `frames` access units of fragmented slices, then lost, swapped, or damaged in
    /// their payload header or FU header (another type, start or end bit, forbidden bit, cut short).
    static func packets(frames: Int, seed: UInt64) throws -> [(RTPHeader, [UInt8])] {
        var rng = SplitMix64(seed: seed)
        let units = (0..<frames).map { index in
            let keyframe = index % 8 == 0
            let slices = (0..<Int.random(in: 1...3, using: &rng)).map { _ in
                randomNAL(type: keyframe ? 19 : 1, size: Int.random(in: 100...3000, using: &rng), using: &rng)
            }
            return AccessUnit(nalUnits: slices, timestamp: UInt32(index) * 3000, isKeyframe: keyframe)
        }
        var damaged: [(RTPHeader, [UInt8])] = []
        for (header, payload) in try rtpPackets(units, budget: 200) {
            var payload = payload
            switch Int.random(in: 0..<60, using: &rng) {
            case 0, 1: continue  // lost
            case 2, 3:  // swapped with the one before
                let previous = damaged.popLast()
                damaged.append((header, payload))
                if let previous { damaged.append(previous) }
                continue
            case 4: payload[2] ^= 0x01  // another FuType
            case 5: payload[2] |= 0x80  // a start bit
            case 6: payload[2] |= 0x40  // an end bit
            case 7: payload[0] |= 0x80  // the forbidden bit
            case 8: payload = Array(payload.prefix(3))  // no data
            default: break
            }
            damaged.append((header, payload))
        }
        return damaged
    }

    /// The access units and counters of `packets` pushed one by one, with middle fragments taken
    /// by `pushMiddleFragment` when `middle` (as `ReceiveSession` takes them in a run: only
    /// packets the tracker found next in order); how many it took.
    static func depacketize(_ packets: [(RTPHeader, [UInt8])], limit: Int, middle: Bool)
        -> ([DepacketizedAccessUnit], DepacketizerCounters, Int)
    {
        var depacketizer = HEVCDepacketizer(maxAccessUnitSize: limit, reorderWindow: 8)
        var tracker = RTPSequenceTracker()
        var units: [DepacketizedAccessUnit] = []
        var taken = 0
        for (header, payload) in packets {
            payload.withUnsafeBytes { payload in
                if middle, let sequence = tracker.trackNext(sequence: header.sequenceNumber, rtpTimestamp: header.timestamp,
                                                            arrival: 0) {
                    if depacketizer.pushMiddleFragment(header, payload: payload, sequence: sequence) {
                        taken += 1
                    } else {
                        depacketizer.push(header, payload: payload, tracked: .init(outcome: .inOrder, extendedSequence: sequence),
                                          into: &units)
                    }
                } else {
                    let tracked = tracker.track(sequence: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: 0)
                    depacketizer.push(header, payload: payload, tracked: tracked, into: &units)
                }
            }
        }
        units += depacketizer.flush()
        return (units, depacketizer.counters, taken)
    }

    @Test("the same access units and counters", arguments: [1 << 20, 2_500])
    func sameAsPush(limit: Int) throws {
        for seed: UInt64 in 1...8 {
            let packets = try Self.packets(frames: 60, seed: seed)
            let (units, counters, _) = Self.depacketize(packets, limit: limit, middle: false)
            let (fastUnits, fastCounters, taken) = Self.depacketize(packets, limit: limit, middle: true)
            #expect(fastUnits == units && fastCounters == counters, "seed \(seed)")
            // Taken often, and the damage was there to be seen.
            #expect(taken > packets.count / 4)
            #expect(counters.lostPackets > 0 && counters.incompleteAccessUnits > 0 && counters.rejectedTotal > 0)
            #expect(counters[.fragmentTypeMismatch] + counters[.fragmentStartAndEnd] + counters[.forbiddenBitSet] > 0)
            if limit < 1 << 20 { #expect(counters.oversizedAccessUnits > 0) }
        }
    }
}
