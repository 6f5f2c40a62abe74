import MediaFormats
import Testing
import TestSupport

/// `HEVCDepacketizer.pushFragment` (a fragment that continues the stream taken with one check:
/// a start, middle or end fragment) against `push(_:payload:tracked:into:)` for every packet:
/// the same access units and counters on streams of fragmented NAL units with lost, swapped and
/// damaged packets, and access units larger than the limit.
@Suite struct HEVCDepacketizerFragmentTests {
    /// Packets of `frames` access units of fragmented slices, then lost, swapped, or damaged in
    /// their payload header or FU header (another type, start or end bit or both, a FuType no NAL
    /// unit has, forbidden bit, cut short) or their marker.
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
            var header = header
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
            case 9: header.marker.toggle()
            case 10: payload[2] |= 0xC0  // start and end
            case 11: payload[2] = payload[2] & 0xC0 | 50  // FuType 50
            default: break
            }
            damaged.append((header, payload))
        }
        return damaged
    }

    /// What `pushFragment` took, by kind of fragment.
    struct Taken: Equatable {
        var starts = 0
        var middles = 0
        var ends = 0
    }

    /// The access units and counters of `packets` pushed one by one, with fragments taken by
    /// `pushFragment` when `fragments` (as `ReceiveSession` takes them in a run: only packets
    /// the tracker found next in order); what it took.
    static func depacketize(_ packets: [(RTPHeader, [UInt8])], limit: Int, fragments: Bool)
        -> ([DepacketizedAccessUnit], DepacketizerCounters, Taken)
    {
        var depacketizer = HEVCDepacketizer(maxAccessUnitSize: limit, reorderWindow: 8)
        var tracker = RTPSequenceTracker()
        var units: [DepacketizedAccessUnit] = []
        var taken = Taken()
        for (header, payload) in packets {
            payload.withUnsafeBytes { payload in
                if fragments, let sequence = tracker.trackNext(sequence: header.sequenceNumber,
                                                               rtpTimestamp: header.timestamp, arrival: 0) {
                    if depacketizer.pushFragment(header, payload: payload, sequence: sequence, into: &units) {
                        switch payload[2] & 0xC0 {
                        case 0x80: taken.starts += 1
                        case 0x40: taken.ends += 1
                        default: taken.middles += 1
                        }
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
            let (units, counters, _) = Self.depacketize(packets, limit: limit, fragments: false)
            let (fastUnits, fastCounters, taken) = Self.depacketize(packets, limit: limit, fragments: true)
            #expect(fastUnits == units && fastCounters == counters, "seed \(seed)")
            // Each kind taken often (a frame's first and last packets too), and the damage was there to be seen.
            #expect(taken.starts + taken.middles + taken.ends > packets.count / 4 && taken.starts > 15 && taken.ends > 15, "\(taken)")
            #expect(counters.lostPackets > 0 && counters.incompleteAccessUnits > 0 && counters.rejectedTotal > 0)
            #expect(counters[.fragmentTypeMismatch] + counters[.fragmentStartAndEnd] + counters[.forbiddenBitSet] > 0)
            if limit < 1 << 20 { #expect(counters.oversizedAccessUnits > 0) }
        }
    }

    /// A limit below one fragment's data: every access unit is abandoned at its first fragment,
    /// which `pushFragment` leaves to `push` (nothing taken, the same counters).
    @Test func limitBelowOneFragment() throws {
        let packets = try Self.packets(frames: 30, seed: 9)
        let (units, counters, _) = Self.depacketize(packets, limit: 150, fragments: false)
        let (fastUnits, fastCounters, taken) = Self.depacketize(packets, limit: 150, fragments: true)
        #expect(fastUnits == units && fastCounters == counters)
        #expect(taken.starts == 0 && counters.oversizedAccessUnits > 20)
    }
}
