// Fuzz oracle of the `rtp-depacketizer` target: Fuzz/Targets/rtp-depacketizer.swift runs it under libFuzzer, and
// Fuzz/Tests/FuzzCorpusReplayTests.swift replays Tests/FuzzCorpus/rtp-depacketizer through it in `swift test`.
//
// RTPHeader.parse + HEVCDepacketizer (RFC 7798), in two modes chosen by
// the first input byte.
//
// Raw mode (even first byte): the input is a reorder window, an access-unit size limit and
// a run of pseudo-packets, each behind a 2-byte big-endian length. Each is parsed with
// RTPHeader.parse; valid ones go into one depacketizer, which is flushed at the end.
// Invariants: no access unit above maxAccessUnitSize; emitted NAL units well formed;
// held packets bounded by the reorder window's storage; counters agree with the output;
// every pushed packet is accounted (duplicate, late or in an access unit) and every lost
// sequence number is attributed to an access unit, unless an access unit was abandoned.
// Two more depacketizers take the same packets as one `RTPSequenceTracker` tracks them, one
// always through `push(_:payload:tracked:into:)`, the other trying `pushFragment` first
// for each packet next in order (as `ReceiveSession`'s runs do): the same access units after
// every packet and the same counters.
//
// Round-trip mode (odd first byte): access units built from the input are packetized with
// HEVCPacketizer and delivered in order, with non-overlapping adjacent swaps; the
// depacketizer must give back exactly the same access units, all complete.

#if canImport(MediaFormats)  // in the test target (Fuzz/Tests); tools/fuzz compiles MediaFormats into the same module
@testable import MediaFormats
#endif

/// The rtp-depacketizer target's checks on one input; a violated invariant goes to `fuzzCheck`.
func fuzzRTPDepacketizer(_ data: UnsafeRawBufferPointer) {
    var input = FuzzInput(data)
    if input.byte() & 1 == 0 {
        rawPackets(&input)
    } else {
        packetizerRoundTrip(&input)
    }
}

private struct Tally {
    var accessUnits = 0
    var nalUnits = 0
    var incomplete = 0
    var packetsInUnits = 0
    var missing = 0
}

private func check(_ units: [DepacketizedAccessUnit], _ depacketizer: HEVCDepacketizer, _ tally: inout Tally) {
    for unit in units {
        let bytes = unit.nalUnits.reduce(0) { $0 + $1.count }
        fuzzCheck(bytes <= depacketizer.maxAccessUnitSize,
                  "access unit of \(bytes) bytes above maxAccessUnitSize \(depacketizer.maxAccessUnitSize)")
        for nal in unit.nalUnits {
            fuzzCheck(nal.count >= 2, "NAL unit of \(nal.count) bytes emitted")
            fuzzCheck(nal[0] & 0x80 == 0, "NAL unit with the forbidden bit emitted")
            fuzzCheck((nal[0] >> 1) & 0x3f < 48, "NAL unit of type \((nal[0] >> 1) & 0x3f) emitted")
        }
        fuzzCheck(unit.packetCount >= 1, "access unit of \(unit.packetCount) packets")
        fuzzCheck(unit.firstSequence <= unit.lastSequence,
                  "firstSequence \(unit.firstSequence) > lastSequence \(unit.lastSequence)")
        fuzzCheck(Int64(unit.packetCount) <= unit.lastSequence - unit.firstSequence + 1,
                  "\(unit.packetCount) packets in sequence range \(unit.firstSequence)...\(unit.lastSequence)")
        fuzzCheck(!unit.isComplete || unit.missingPackets == 0, "complete access unit with \(unit.missingPackets) missing")
        fuzzCheck(unit.missingPackets >= 0, "negative missingPackets")
        tally.accessUnits += 1
        tally.nalUnits += unit.nalUnits.count
        if !unit.isComplete { tally.incomplete += 1 }
        tally.packetsInUnits += unit.packetCount
        tally.missing += unit.missingPackets
    }
}

private func rawPackets(_ input: inout FuzzInput) {
    let window = Int(input.byte() % 65)
    let maxAccessUnitSize = 64 + Int(input.uint16())
    var depacketizer = HEVCDepacketizer(maxAccessUnitSize: maxAccessUnitSize, reorderWindow: window)
    var tally = Tally()
    var pushed = 0
    var tracker = RTPSequenceTracker()
    var general = HEVCDepacketizer(maxAccessUnitSize: maxAccessUnitSize, reorderWindow: window)
    var runs = HEVCDepacketizer(maxAccessUnitSize: maxAccessUnitSize, reorderWindow: window)
    while !input.isEmpty {
        let length = Int(input.uint16() & 0x7FF)
        let packet = input.take(length)
        guard let parsed = try? RTPHeader.parse(packet) else { continue }
        fuzzCheck(parsed.payloadRange.lowerBound >= RTPHeader.fixedSize
                  && parsed.payloadRange.upperBound <= packet.count, "payload range \(parsed.payloadRange) of \(packet.count)")
        let payload = UnsafeRawBufferPointer(rebasing: packet[parsed.payloadRange])
        let units = depacketizer.push(parsed.header, payload: payload)
        pushed += 1
        let tracked = tracker.track(sequence: parsed.header.sequenceNumber, rtpTimestamp: parsed.header.timestamp, arrival: 0)
        var generalUnits: [DepacketizedAccessUnit] = []
        var runUnits: [DepacketizedAccessUnit] = []
        general.push(parsed.header, payload: payload, tracked: tracked, into: &generalUnits)
        if tracked.outcome != .inOrder
            || !runs.pushFragment(parsed.header, payload: payload, sequence: tracked.extendedSequence, into: &runUnits) {
            runs.push(parsed.header, payload: payload, tracked: tracked, into: &runUnits)
        }
        fuzzCheck(runUnits == generalUnits, "pushFragment: other access units than push at packet \(pushed)")
        check(units, depacketizer, &tally)
        // The held packets live in reorderWindow + 1 slots.
        fuzzCheck(depacketizer.heldPacketCount >= 0 && depacketizer.heldPacketCount <= window + 1,
                  "\(depacketizer.heldPacketCount) held packets with reorderWindow \(window)")
    }
    check(depacketizer.flush(), depacketizer, &tally)
    fuzzCheck(runs.flush() == general.flush(), "pushFragment: other access units than push at the flush")
    fuzzCheck(runs.counters == general.counters, "pushFragment: counters \(runs.counters), push \(general.counters)")
    fuzzCheck(depacketizer.heldPacketCount == 0, "\(depacketizer.heldPacketCount) packets held after flush")
    fuzzCheck(depacketizer.flush().isEmpty, "a second flush returned access units")

    let counters = depacketizer.counters
    fuzzCheck(counters.packets == pushed, "counters.packets \(counters.packets), pushed \(pushed)")
    fuzzCheck(counters.accessUnits == tally.accessUnits, "counters.accessUnits \(counters.accessUnits), returned \(tally.accessUnits)")
    fuzzCheck(counters.nalUnits == tally.nalUnits, "counters.nalUnits \(counters.nalUnits), returned \(tally.nalUnits)")
    fuzzCheck(counters.incompleteAccessUnits == tally.incomplete,
              "counters.incompleteAccessUnits \(counters.incompleteAccessUnits), returned \(tally.incomplete)")
    fuzzCheck(counters.rejected.values.allSatisfy { $0 > 0 }, "a zero or negative rejection count")
    if counters.oversizedAccessUnits == 0 {
        fuzzCheck(counters.packets == counters.duplicate + counters.late + tally.packetsInUnits,
                  "packets \(counters.packets) != duplicate \(counters.duplicate) + late \(counters.late) + in access units \(tally.packetsInUnits)")
        fuzzCheck(counters.lostPackets == tally.missing,
                  "lostPackets \(counters.lostPackets) != missingPackets attributed \(tally.missing)")
    } else {
        fuzzCheck(counters.packets >= counters.duplicate + counters.late + tally.packetsInUnits, "more packets accounted than pushed")
        fuzzCheck(counters.lostPackets >= tally.missing, "more missing attributed than lost")
    }
}

private func packetizerRoundTrip(_ input: inout FuzzInput) {
    let window = 1 + Int(input.byte() % 32)
    let budget = 4 + Int(input.uint16() % 1500)
    let firstSequence = input.uint16()
    let firstTimestamp = input.uint32()
    let unitCount = 1 + Int(input.byte() % 8)
    guard let packetizer = try? HEVCPacketizer(maxPayloadSize: budget) else { return }

    var units: [AccessUnit] = []
    for index in 0..<unitCount {
        var nals: [[UInt8]] = []
        let nalCount = 1 + Int(input.byte() % 6)
        for _ in 0..<nalCount {
            let type = input.byte() % 41
            let tid = 1 + input.byte() % 7
            let size = Int(input.uint16() % 4000)
            var nal = [type << 1, tid]
            nal.append(contentsOf: input.take(size))
            nals.append(nal)
        }
        let keyframe = nals.contains { HEVCNALUnitType(rawValue: $0[0] >> 1).isIRAP }
        units.append(AccessUnit(nalUnits: nals, timestamp: firstTimestamp &+ UInt32(index) &* 3000, isKeyframe: keyframe))
    }

    var packets: [(RTPHeader, [UInt8])] = []
    var sequence = firstSequence
    for unit in units {
        for payload in packetizer.plan(unit) {
            let bytes = packetizer.bytes(of: payload, of: unit)
            fuzzCheck(bytes.count <= budget, "payload of \(bytes.count) bytes over the budget \(budget)")
            let header = RTPHeader(marker: payload.marker, payloadType: 96, sequenceNumber: sequence,
                                   timestamp: unit.timestamp, ssrc: 0x1234_5678)
            packets.append((header, bytes))
            sequence &+= 1
        }
    }
    // Non-overlapping adjacent swaps: no packet moves more than one place.
    var index = 0
    while index + 1 < packets.count {
        if input.byte() & 1 == 1 {
            packets.swapAt(index, index + 1)
            index += 2
        } else {
            index += 1
        }
    }

    var depacketizer = HEVCDepacketizer(reorderWindow: window)
    var output: [DepacketizedAccessUnit] = []
    for (header, payload) in packets {
        output += depacketizer.push(header, payload: payload)
    }
    output += depacketizer.flush()
    fuzzCheck(output.count == units.count, "\(units.count) access units sent, \(output.count) returned")
    for (sent, got) in zip(units, output) {
        fuzzCheck(got.isComplete, "access unit \(got.timestamp) incomplete")
        fuzzCheck(got.timestamp == sent.timestamp, "timestamp \(got.timestamp), sent \(sent.timestamp)")
        fuzzCheck(got.nalUnits == sent.nalUnits, "access unit \(sent.timestamp): NAL units differ")
        fuzzCheck(got.isKeyframe == sent.isKeyframe, "access unit \(sent.timestamp): isKeyframe differs")
    }
    let counters = depacketizer.counters
    fuzzCheck(counters.lostPackets == 0 && counters.rejectedTotal == 0 && counters.droppedNALUnits == 0
              && counters.duplicate == 0 && counters.late == 0,
              "clean stream gave counters \(counters)")
}
