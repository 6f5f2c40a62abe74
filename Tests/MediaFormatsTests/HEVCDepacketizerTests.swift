import Testing
import TestSupport
import MediaFormats

@Suite struct HEVCDepacketizerTests {
    let budget = 100
    // AU0: VPS+SPS (AP) and a 350-byte IDR in 4 FUs; AU1: P slice in 3 FUs; AU2: small P slice.
    var vps: [UInt8] { makeNAL(type: 32, size: 20) }
    var sps: [UInt8] { makeNAL(type: 33, size: 30) }
    var idr: [UInt8] { makeNAL(type: 19, size: 350, fill: 1) }
    var p1: [UInt8] { makeNAL(type: 1, size: 250, fill: 2) }
    var p2: [UInt8] { makeNAL(type: 1, size: 60, fill: 3) }
    var aus: [AccessUnit] {
        [AccessUnit(nalUnits: [vps, sps, idr], timestamp: 0, isKeyframe: true),
         AccessUnit(nalUnits: [p1], timestamp: 3000, isKeyframe: false),
         AccessUnit(nalUnits: [p2], timestamp: 6000, isKeyframe: false)]
    }
    // Packet indices: 0 AP, 1-4 IDR FUs, 5-7 P1 FUs, 8 P2 single.
    func packets(first: UInt16 = 1000) throws -> [(RTPHeader, [UInt8])] {
        let packets = try rtpPackets(aus, budget: budget, firstSequence: first)
        precondition(packets.count == 9)
        return packets
    }

    @Test func lostFirstMiddleOrLastFragment() throws {
        for lost in [5, 6, 7] {  // first, middle, last fragment of P1
            var packets = try packets()
            packets.remove(at: lost)
            var depacketizer = HEVCDepacketizer()
            let out = depacketize(packets, into: &depacketizer)
            #expect(out.count == 3, "lost \(lost)")
            #expect(out[0].isComplete && out[0].nalUnits == [vps, sps, idr] && out[0].isKeyframe)
            #expect(!out[1].isComplete && out[1].nalUnits.isEmpty && out[1].missingPackets == 1 && out[1].timestamp == 3000)
            #expect(out[2].isComplete && out[2].nalUnits == [p2] && out[2].missingPackets == 0)
            #expect(depacketizer.counters.lostPackets == 1 && depacketizer.counters.droppedNALUnits == 1)
            #expect(depacketizer.counters.incompleteAccessUnits == 1 && depacketizer.counters.rejectedTotal == 0)
        }
    }

    /// NAL units rebuilt from fragments start with room for the largest of their type lately:
    /// slices of several types growing and shrinking from frame to frame (past that room,
    /// below it, a type seen first) still come out byte for byte.
    @Test func fragmentedNALUnitsOfChangingSizesAndTypesAreRebuiltWhole() throws {
        let sizes: [(type: UInt8, size: Int)] = [(19, 3000), (1, 200), (1, 900), (0, 150), (1, 5000), (19, 800),
                                                 (1, 120), (0, 2600), (19, 6100), (1, 3)]
        let units = sizes.enumerated().map { index, nal in
            AccessUnit(nalUnits: [makeNAL(type: nal.type, size: nal.size, fill: UInt8(index + 1))],
                       timestamp: UInt32(index) * 3000, isKeyframe: nal.type == 19)
        }
        var depacketizer = HEVCDepacketizer()
        let out = depacketize(try rtpPackets(units, budget: budget), into: &depacketizer)
        #expect(out.map(\.nalUnits) == units.map(\.nalUnits))
        #expect(out.allSatisfy(\.isComplete) && depacketizer.counters.rejectedTotal == 0)
    }

    /// NAL units given back (`recycle`) are rebuilt into the same arrays: the P slice after a
    /// recycled 6,000-byte IDR slice starts with the IDR's room (a fresh one would have a few
    /// hundred bytes), every access unit comes out byte for byte, and one whose NAL units the
    /// caller kept (so shared when given back) is never written over.
    @Test func recycledNALUnitsAreReusedAndKeptOnesStayIntact() throws {
        // The first access unit comes out with the second (stream start): the P slices follow both.
        let units = [AccessUnit(nalUnits: [makeNAL(type: 1, size: 50, fill: 5)], timestamp: 0, isKeyframe: false),
                     AccessUnit(nalUnits: [makeNAL(type: 19, size: 6000, fill: 1)], timestamp: 3000, isKeyframe: true),
                     AccessUnit(nalUnits: [makeNAL(type: 1, size: 300, fill: 2)], timestamp: 6000, isKeyframe: false),
                     AccessUnit(nalUnits: [makeNAL(type: 1, size: 400, fill: 3)], timestamp: 9000, isKeyframe: false),
                     AccessUnit(nalUnits: [makeNAL(type: 1, size: 350, fill: 4)], timestamp: 12000, isKeyframe: false)]
        var depacketizer = HEVCDepacketizer()
        var out: [DepacketizedAccessUnit] = []
        var kept: [[UInt8]] = []
        for (header, payload) in try rtpPackets(units, budget: budget) {
            for unit in payload.withUnsafeBytes({ depacketizer.push(header, payload: $0) }) {
                #expect(unit.nalUnits == units[out.count].nalUnits)
                if unit.timestamp == 6000 {
                    #expect(unit.nalUnits[0].capacity >= 6000, "the P slice was not built in the IDR slice's array")
                    kept = unit.nalUnits  // held while given back: shared
                }
                out.append(DepacketizedAccessUnit(timestamp: unit.timestamp, nalUnits: [], isComplete: unit.isComplete,
                                                  isKeyframe: unit.isKeyframe, firstSequence: 0, lastSequence: 0,
                                                  packetCount: 0, missingPackets: 0))
                var back = unit.nalUnits
                depacketizer.recycle(&back)
                #expect(back.isEmpty)
            }
        }
        #expect(depacketizer.flush().isEmpty)
        #expect(out.count == units.count && out.allSatisfy(\.isComplete))
        #expect(kept == units[2].nalUnits, "a NAL unit the caller kept was written over")
    }

    @Test func lostFragmentKeepsTheWholeNALUnitsOfItsAccessUnit() throws {
        var packets = try packets()
        packets.remove(at: 2)  // second IDR fragment
        var depacketizer = HEVCDepacketizer()
        let out = depacketize(packets, into: &depacketizer)
        #expect(out.map(\.nalUnits) == [[vps, sps], [p1], [p2]])
        #expect(out.map(\.isComplete) == [false, true, true])
        #expect(!out[0].isKeyframe)  // the IRAP slice was lost
        #expect(out[0].firstSequence == 1000 && out[0].lastSequence == 1004 && out[0].packetCount == 4)
    }

    @Test func duplicateFragmentIsCounted() throws {
        var packets = try packets()
        packets.insert(packets[3], at: 4)
        packets.append(packets[1])
        var depacketizer = HEVCDepacketizer()
        let out = depacketize(packets, into: &depacketizer)
        #expect(out.map(\.accessUnit) == aus)
        #expect(out.allSatisfy { $0.isComplete })
        #expect(depacketizer.counters.duplicate == 2 && depacketizer.counters.late == 0)
    }

    @Test func reorderedWithinTheWindowIsComplete() throws {
        let original = try packets()
        var rng = SplitMix64(seed: 11)
        for _ in 0..<50 {
            // Shuffle inside each access unit, keeping access units in order.
            var packets: [(RTPHeader, [UInt8])] = []
            packets += original[0..<5].shuffled(using: &rng)
            packets += original[5..<8].shuffled(using: &rng)
            packets += original[8..<9]
            var depacketizer = HEVCDepacketizer(reorderWindow: 8)
            let out = depacketize(packets, into: &depacketizer)
            #expect(out.map(\.accessUnit) == aus)
            #expect(out.allSatisfy { $0.isComplete })
            #expect(depacketizer.counters.late == 0 && depacketizer.counters.lostPackets == 0)
        }
        // Held back: nothing comes out until the gap is filled.
        let twice = try rtpPackets(aus + aus.map { AccessUnit(nalUnits: $0.nalUnits, timestamp: $0.timestamp + 9000, isKeyframe: $0.isKeyframe) }, budget: budget)
        var depacketizer = HEVCDepacketizer()
        let first = depacketize(Array(twice[0..<9]), into: &depacketizer, flush: false)
        #expect(first.map(\.accessUnit) == aus)  // the stream has started
        for index in [9, 11, 12, 13] { #expect(depacketizer.push(twice[index].0, payload: twice[index].1).isEmpty) }
        #expect(depacketizer.heldPacketCount == 3)
        let out = depacketizer.push(twice[10].0, payload: twice[10].1)
        #expect(out.count == 1 && out[0].isComplete && out[0].nalUnits == [vps, sps, idr] && out[0].timestamp == 9000)
        #expect(depacketizer.heldPacketCount == 0)
    }

    @Test func payloadBytesAreOnlyReadDuringThePush() throws {
        // Every payload through one buffer, scribbled over after each push (as a receive
        // buffer is reused): packets consumed at once and packets held behind a gap both
        // come out intact.
        let original = try packets()
        let scribble = [UInt8](repeating: 0x55, count: 2048)
        for order in [Array(0..<9), [0, 2, 3, 1, 4, 6, 5, 7, 8]] {
            let arriving = order.map { original[$0] }
            var depacketizer = HEVCDepacketizer(reorderWindow: 4)
            var out: [DepacketizedAccessUnit] = []
            var buffer = scribble
            for (header, payload) in arriving {
                buffer.replaceSubrange(0..<payload.count, with: payload)
                out += buffer.withUnsafeBytes {
                    depacketizer.push(header, payload: UnsafeRawBufferPointer(rebasing: $0[0..<payload.count]))
                }
                buffer.replaceSubrange(0..<payload.count, with: repeatElement(0x55, count: payload.count))
            }
            out += depacketizer.flush()
            #expect(out.map(\.accessUnit) == aus, "order \(order)")
            #expect(out.allSatisfy { $0.isComplete })
        }
    }

    @Test func reorderingBeyondTheWindowGivesUp() throws {
        // One access unit of 30 fragments; fragment 3 arrives after everything else.
        let big = makeNAL(type: 1, size: 30 * 97 + 2, fill: 5)
        let unit = AccessUnit(nalUnits: [big], timestamp: 1, isKeyframe: false)
        let next = AccessUnit(nalUnits: [p2], timestamp: 2, isKeyframe: false)
        var packets = try rtpPackets([unit, next], budget: budget)
        #expect(packets.count == 31)
        let straggler = packets.remove(at: 3)
        packets.append(straggler)
        var depacketizer = HEVCDepacketizer(reorderWindow: 4)
        let out = depacketize(packets, into: &depacketizer)
        #expect(out.count == 2)
        #expect(!out[0].isComplete && out[0].nalUnits.isEmpty && out[0].missingPackets == 1 && out[0].packetCount == 29)
        #expect(out[1].isComplete && out[1].nalUnits == [p2])
        #expect(depacketizer.counters.late == 1 && depacketizer.counters.lostPackets == 1)
        #expect(depacketizer.heldPacketCount == 0)

        // With a window wide enough (and no later complete access unit), the same order is complete.
        var wide = HEVCDepacketizer(reorderWindow: 32)
        let wideOut = depacketize(packets.filter { $0.0.timestamp == 1 }, into: &wide)
        #expect(wideOut.map(\.accessUnit) == [unit] && wideOut.allSatisfy { $0.isComplete })
        #expect(wide.counters.late == 0 && wide.counters.lostPackets == 0)
    }

    @Test func laterCompleteAccessUnitGivesUpAnEarlierGap() throws {
        var packets = try packets()
        let straggler = packets.remove(at: 6)  // P1 middle fragment, arrives after P2
        packets.append(straggler)
        var depacketizer = HEVCDepacketizer(reorderWindow: 32)
        let out = depacketize(packets, into: &depacketizer, flush: false)
        #expect(out.map(\.isComplete) == [true, false, true])
        #expect(out[2].nalUnits == [p2])
        #expect(depacketizer.counters.late == 1)
    }

    @Test func sequenceWrapsFrom65535To0() throws {
        let packets = try packets(first: 65531)  // 65531...65535, 0...3
        #expect(packets[4].0.sequenceNumber == 65535 && packets[5].0.sequenceNumber == 0)
        var depacketizer = HEVCDepacketizer()
        var shuffled = packets
        shuffled.swapAt(4, 5)  // 0 before 65535
        let out = depacketize(shuffled, into: &depacketizer)
        #expect(out.map(\.accessUnit) == aus && out.allSatisfy { $0.isComplete })
        #expect(out[0].firstSequence == 65531 && out[0].lastSequence == 65535)
        #expect(out[1].firstSequence == 65536 && out[2].lastSequence == 65539)
        #expect(depacketizer.counters.lostPackets == 0 && depacketizer.counters.late == 0)
    }

    @Test func malformedPayloadsAreCountedAndDropped() throws {
        let cases: [(HEVCPayloadRejection, [UInt8])] = [
            (.truncatedPayloadHeader, []),
            (.truncatedPayloadHeader, [0x02]),
            (.truncatedPayloadHeader, [49 << 1, 1]),
            (.forbiddenBitSet, [0x80 | 2, 1, 5, 5]),
            (.aggregationSizeOverrun, [48 << 1, 1, 0, 10, 0x02, 0x01]),
            (.aggregationSizeOverrun, [48 << 1, 1, 0, 3, 0x02, 0x01, 0x80, 0x07]),
            (.aggregationUnitTooShort, [48 << 1, 1, 0, 0, 0, 2, 0x02, 0x01]),
            (.aggregationUnitTooShort, [48 << 1, 1]),
            (.aggregationInvalidUnit, [48 << 1, 1, 0, 2, 49 << 1, 1, 0, 2, 0x02, 0x01]),
            (.fragmentStartAndEnd, [49 << 1, 1, 0xC1, 9, 9]),
            (.fragmentInvalidType, [49 << 1, 1, 0x80 | 48, 9, 9]),
            (.fragmentInvalidType, [49 << 1, 1, 0x80 | 50, 9, 9]),
            (.fragmentEmpty, [49 << 1, 1, 0x81]),
            (.paciUnsupported, [50 << 1, 1, 0, 0, 0]),
            (.unsupportedNALType, [51 << 1, 1, 3]),
            (.unsupportedNALType, [63 << 1, 1, 3]),
        ]
        for (reason, payload) in cases {
            let good = makeNAL(type: 1, size: 40)
            var depacketizer = HEVCDepacketizer()
            var out = depacketizer.push(RTPHeader(marker: false, payloadType: 96, sequenceNumber: 1, timestamp: 9, ssrc: 1), payload: good)
            out += depacketizer.push(RTPHeader(marker: true, payloadType: 96, sequenceNumber: 2, timestamp: 9, ssrc: 1), payload: payload)
            out += depacketizer.push(RTPHeader(marker: true, payloadType: 96, sequenceNumber: 3, timestamp: 10, ssrc: 1), payload: good)
            #expect(depacketizer.counters[reason] == 1, "\(reason)")
            #expect(depacketizer.counters.rejectedTotal == 1, "\(reason)")
            #expect(out.map(\.nalUnits) == [[good], [good]], "\(reason)")
            #expect(out.map(\.isComplete) == [false, true], "\(reason)")
            #expect(out[0].packetCount == 2)
        }
    }

    /// An access unit closed before its end came (`closeAccessUnit`) comes out at once,
    /// incomplete; its packets arriving after are late, not a second access unit of its
    /// timestamp, and the stream goes on with the next one.
    @Test func anAccessUnitClosedBeforeItsEndTakesNoMoreOfItsPackets() throws {
        let packets = try packets()
        var depacketizer = HEVCDepacketizer()
        var out = depacketize(Array(packets[...5]), into: &depacketizer, flush: false)  // AU0, and P1's first fragment
        depacketizer.closeAccessUnit(into: &out)
        #expect(out.count == 2 && out[0].isComplete && out[0].nalUnits == [vps, sps, idr])
        #expect(!out[1].isComplete && out[1].timestamp == 3000 && out[1].packetCount == 1)
        out += depacketize(Array(packets[6...]), into: &depacketizer)  // P1's last two fragments, then AU2
        #expect(out.count == 3 && out[2].isComplete && out[2].nalUnits == [p2] && out[2].timestamp == 6000,
                "\(out.map { ($0.timestamp, $0.isComplete, $0.packetCount) }) \(depacketizer.counters)")
        #expect(depacketizer.counters.late == 2 && depacketizer.counters.accessUnits == 3)
        #expect(depacketizer.counters.incompleteAccessUnits == 1 && depacketizer.counters.lostPackets == 0)
    }

    @Test func fragmentErrorsNeedOrderToDetect() throws {
        let header = { (seq: UInt16, marker: Bool) in RTPHeader(marker: marker, payloadType: 96, sequenceNumber: seq, timestamp: 5, ssrc: 1) }
        let single = makeNAL(type: 1, size: 20)
        // Middle fragment with no start and no loss before it.
        var depacketizer = HEVCDepacketizer()
        var out = depacketizer.push(header(1, false), payload: single)
        out += depacketizer.push(header(2, false), payload: [49 << 1, 1, 0x01, 7, 7])
        out += depacketizer.push(header(3, true), payload: [49 << 1, 1, 0x41, 7, 7])
        out += depacketizer.flush()
        #expect(out.count == 1 && out[0].nalUnits == [single] && !out[0].isComplete)
        #expect(depacketizer.counters[.fragmentWithoutStart] == 1 && depacketizer.counters.droppedNALUnits == 1)

        // Start fragment cut off by a single NAL unit; type mismatch between start and end.
        depacketizer = HEVCDepacketizer()
        out = depacketizer.push(header(1, false), payload: [49 << 1, 1, 0x81, 7, 7])
        out += depacketizer.push(header(2, false), payload: single)
        out += depacketizer.push(header(3, false), payload: [49 << 1, 1, 0x81, 7, 7])
        out += depacketizer.push(header(4, true), payload: [49 << 1, 1, 0x42, 7, 7])
        out += depacketizer.flush()
        #expect(out.count == 1 && out[0].nalUnits == [single] && !out[0].isComplete)
        #expect(depacketizer.counters[.fragmentWithoutEnd] == 1 && depacketizer.counters[.fragmentTypeMismatch] == 1)
        #expect(depacketizer.counters.droppedNALUnits == 2)
    }

    @Test func oversizedAccessUnitIsAbandoned() throws {
        let big = AccessUnit(nalUnits: [makeNAL(type: 1, size: 5000)], timestamp: 1, isKeyframe: false)
        let small = AccessUnit(nalUnits: [p2], timestamp: 2, isKeyframe: false)
        let packets = try rtpPackets([big, small], budget: budget)
        var depacketizer = HEVCDepacketizer(maxAccessUnitSize: 1000)
        let out = depacketize(packets, into: &depacketizer)
        #expect(out.map(\.accessUnit) == [small])
        #expect(depacketizer.counters.oversizedAccessUnits == 1)
    }

    @Test func ssrcChangeAndRestartResynchronize() throws {
        let packets = try packets()
        var depacketizer = HEVCDepacketizer()
        var out = depacketize(Array(packets[0..<5]), into: &depacketizer, flush: false)
        // The sender restarts 20000 sequence numbers back: two in a row resynchronize.
        var restarted = try rtpPackets(aus, budget: budget, firstSequence: 1000 &- 20000)
        restarted = Array(restarted[5...])
        out += depacketize(restarted, into: &depacketizer)
        #expect(out.first?.nalUnits == [vps, sps, idr])
        #expect(out.last?.nalUnits == [p2] && out.last?.isComplete == true)
        #expect(depacketizer.counters.resynchronizations == 1 && depacketizer.counters.late == 1)

        var other = HEVCDepacketizer()
        var mixed = packets
        mixed[8].0.ssrc = 99
        let mixedOut = depacketize(mixed, into: &other)
        #expect(mixedOut.map(\.nalUnits) == [[vps, sps, idr], [p1], [p2]])
        #expect(other.counters.resynchronizations == 1)
    }

    /// A packet far ahead is a sequence jump, as the tracker says: late, not a gap of
    /// thousands of lost packets. The next in sequence makes it a restart.
    @Test func aJumpAheadIsLateUntilTheNextInSequenceRestarts() throws {
        let packets = try packets()
        var depacketizer = HEVCDepacketizer()
        var out = depacketize(Array(packets[0..<5]), into: &depacketizer, flush: false)
        let jumped = try rtpPackets(aus, budget: budget, firstSequence: 1000 &+ 20000)
        out += depacketize(Array(jumped[5...]), into: &depacketizer)
        #expect(out.map(\.nalUnits) == [[vps, sps, idr], [], [p2]])
        #expect(out.map(\.isComplete) == [true, false, true])
        #expect(depacketizer.counters.lostPackets == 0)
        #expect(depacketizer.counters.late == 1 && depacketizer.counters.resynchronizations == 1)
    }

    /// With the caller's tracker, the depacketizer follows its numbering: a restart the
    /// tracker saw resynchronizes, and the packet before it can go in first.
    @Test func theCallersTrackerDecides() throws {
        let before = try packets()
        let after = try rtpPackets(aus, budget: budget, firstSequence: 40_000)
        var tracker = RTPSequenceTracker()
        var depacketizer = HEVCDepacketizer()
        var out: [DepacketizedAccessUnit] = []
        for (header, payload) in before {
            let tracked = tracker.track(sequence: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: 0)
            out += payload.withUnsafeBytes { depacketizer.push(header, payload: $0, tracked: tracked) }
        }
        let jump = tracker.track(sequence: after[0].0.sequenceNumber, rtpTimestamp: after[0].0.timestamp, arrival: 0)
        #expect(jump.outcome == .sequenceJump)
        let restart = tracker.track(sequence: after[1].0.sequenceNumber, rtpTimestamp: after[1].0.timestamp, arrival: 0)
        #expect(restart == .init(outcome: .restarted, extendedSequence: 40_001))
        // The packet kept aside goes in as the restart, the second one in order after it.
        out += after[0].1.withUnsafeBytes {
            depacketizer.push(after[0].0, payload: $0, tracked: .init(outcome: .restarted, extendedSequence: 40_000))
        }
        out += after[1].1.withUnsafeBytes {
            depacketizer.push(after[1].0, payload: $0, tracked: .init(outcome: .inOrder, extendedSequence: 40_001))
        }
        for (header, payload) in after[2...] {
            let tracked = tracker.track(sequence: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: 0)
            out += payload.withUnsafeBytes { depacketizer.push(header, payload: $0, tracked: tracked) }
        }
        out += depacketizer.flush()
        #expect(out.map(\.accessUnit) == aus + aus)
        #expect(out.allSatisfy { $0.isComplete })
        #expect(out[3].firstSequence == 40_000 && out[5].lastSequence == 40_008)
        #expect(depacketizer.counters.resynchronizations == 1 && depacketizer.counters.late == 0)
        #expect(tracker.received == 18 && tracker.lost == 0)
    }

    /// `push(_:payload:tracked:into:)` appends to the caller's array what the returning form
    /// returns, packet after packet (a swapped pair and a lost packet included).
    @Test func pushingIntoOneArrayAppendsWhatPushReturns() throws {
        var input = try packets()
        input.swapAt(1, 2)
        input.remove(at: 5)
        var tracker = RTPSequenceTracker()
        var returning = HEVCDepacketizer(), appending = HEVCDepacketizer()
        var returned: [DepacketizedAccessUnit] = []
        var appended = [DepacketizedAccessUnit(timestamp: 7, nalUnits: [[2, 1]], isComplete: true, isKeyframe: false,
                                               firstSequence: 0, lastSequence: 0, packetCount: 1, missingPackets: 0)]
        for (header, payload) in input {
            let tracked = tracker.track(sequence: header.sequenceNumber, rtpTimestamp: header.timestamp, arrival: 0)
            returned += payload.withUnsafeBytes { returning.push(header, payload: $0, tracked: tracked) }
            payload.withUnsafeBytes { appending.push(header, payload: $0, tracked: tracked, into: &appended) }
        }
        returned += returning.flush()
        appended += appending.flush()
        #expect(returned.count >= 2 && appended.first?.timestamp == 7 && Array(appended.dropFirst()) == returned)
        #expect(appending.counters == returning.counters && returning.counters.lostPackets == 1)
    }

    @Test func randomPacketsNeverTrapAndStayBounded() throws {
        var rng = SplitMix64(seed: 99)
        var depacketizer = HEVCDepacketizer(maxAccessUnitSize: 64 << 10, reorderWindow: 32)
        var base: UInt16 = 0
        var emitted = 0
        var maxHeld = 0
        let validPackets = try rtpPackets(aus, budget: budget)
        for index in 0..<20_000 {
            var payload: [UInt8]
            if index % 4 == 0 {
                payload = validPackets[Int.random(in: 0..<validPackets.count, using: &rng)].1
                if Bool.random(using: &rng), !payload.isEmpty { payload[Int.random(in: 0..<payload.count, using: &rng)] ^= 0xFF }
            } else {
                payload = (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                if Bool.random(using: &rng), payload.count > 2 { payload[0] = UInt8.random(in: 0...63, using: &rng) << 1 }
            }
            base &+= UInt16.random(in: 0...3, using: &rng)
            let sequence = Int.random(in: 0..<10, using: &rng) == 0 ? UInt16.random(in: 0...UInt16.max, using: &rng)
                : base &+ UInt16(truncatingIfNeeded: Int.random(in: -40...40, using: &rng))
            let header = RTPHeader(marker: Int.random(in: 0..<4, using: &rng) == 0, payloadType: 96, sequenceNumber: sequence,
                                   timestamp: UInt32(base / 4), ssrc: Int.random(in: 0..<500, using: &rng) == 0 ? 2 : 1)
            let out = depacketizer.push(header, payload: payload)
            emitted += out.count
            maxHeld = max(maxHeld, depacketizer.heldPacketCount)
            for unit in out {
                #expect(unit.nalUnits.allSatisfy { $0.count >= 2 && $0[0] & 0x80 == 0 })
                #expect(unit.nalUnits.reduce(0) { $0 + $1.count } <= 64 << 10)
            }
        }
        emitted += depacketizer.flush().count
        #expect(maxHeld <= 32)
        #expect(emitted > 100)
        let counters = depacketizer.counters
        #expect(counters.packets == 20_000 && counters.rejectedTotal > 1000 && counters.late > 0 && counters.duplicate > 0)
    }
}
