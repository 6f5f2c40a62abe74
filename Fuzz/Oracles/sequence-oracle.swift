// Fuzz oracle of the `sequence` target: Fuzz/Targets/sequence.swift runs it under libFuzzer, and
// Fuzz/Tests/FuzzCorpusReplayTests.swift replays Tests/FuzzCorpus/sequence through it in `swift test`.
//
// RTPSequenceTracker.record.
//
// Model mode (odd first byte): sequence numbers stay within a span of at most 3000 around a
// start point (which may sit just below the 65535 -> 0 wrap), so no jump, late packet or
// restart can happen; an exact reference model then predicts received, duplicate,
// reordered, expected and lost.
//
// Free mode (even first byte): any sequence numbers. Invariants: lost >= 0,
// expected >= received, every packet accounted once
// (packetsRecorded == received + duplicate + sequenceJump - restarts), late <= sequenceJump,
// missingSequences within lost, and the report block agrees with the counts.

#if canImport(MediaFormats)  // in the test target (Fuzz/Tests); tools/fuzz compiles MediaFormats into the same module
@testable import MediaFormats
#endif

/// The sequence target's checks on one input; a violated invariant goes to `fuzzCheck`.
func fuzzSequence(_ data: UnsafeRawBufferPointer) {
    var input = FuzzInput(data)
    if input.byte() & 1 == 1 {
        model(&input)
    } else {
        free(&input)
    }
}

private func invariants(_ tracker: RTPSequenceTracker) {
    fuzzCheck(tracker.lost >= 0, "lost \(tracker.lost) < 0")
    fuzzCheck(tracker.expected >= Int64(tracker.received), "expected \(tracker.expected) < received \(tracker.received)")
    fuzzCheck(tracker.packetsRecorded == tracker.received + tracker.duplicate + tracker.sequenceJump - tracker.restarts,
              "packetsRecorded \(tracker.packetsRecorded) != received \(tracker.received) + duplicate \(tracker.duplicate) + sequenceJump \(tracker.sequenceJump) - restarts \(tracker.restarts)")
    fuzzCheck(tracker.late <= tracker.sequenceJump, "late \(tracker.late) > sequenceJump \(tracker.sequenceJump)")
    fuzzCheck(tracker.reordered <= tracker.received, "reordered \(tracker.reordered) > received \(tracker.received)")
}

private func free(_ input: inout FuzzInput) {
    var tracker = RTPSequenceTracker()
    var timestamp: UInt32 = 0
    var arrival: UInt32 = 0
    while !input.isEmpty {
        let sequence = input.uint16()
        let step = input.byte()
        timestamp &+= UInt32(step & 0xF0) * 200
        arrival &+= UInt32(step & 0x0F) * 700
        tracker.record(sequence: sequence, rtpTimestamp: timestamp, arrival: arrival)
        invariants(tracker)
    }
    let missing = tracker.missingSequences(limit: RTPSequenceTracker.windowSize)
    fuzzCheck(Int64(missing.count) <= tracker.lost, "\(missing.count) missing sequences, lost \(tracker.lost)")
    let lost = tracker.lost
    if let block = tracker.makeReportBlock(ssrc: 1, lastSR: 0, delaySinceLastSR: 5) {
        fuzzCheck(Int64(block.cumulativeLost) == min(lost, Int64(RTCPReportBlock.maxCumulativeLost)), "cumulativeLost \(block.cumulativeLost), lost \(lost)")
        fuzzCheck(block.delaySinceLastSR == 0, "DLSR without an SR")
    } else {
        fuzzCheck(tracker.packetsRecorded == 0, "no report block after \(tracker.packetsRecorded) packets")
    }
}

private func model(_ input: inout FuzzInput) {
    let span = 1 + Int(input.uint16() % 3000)
    // Start points near the wrap are the interesting ones.
    let origin = input.byte() & 1 == 1 ? UInt16(65535 - Int(input.byte()) * 12) : input.uint16()
    var tracker = RTPSequenceTracker()
    var seen = Set<Int>()
    var packets = 0, duplicates = 0, reordered = 0
    var lowest = Int.max, highest = Int.min
    // Offsets are relative to the first packet, which the tracker treats as its start.
    var first: Int? = nil
    while !input.isEmpty {
        let offset = Int(input.uint16()) % span
        if first == nil { first = offset }
        let sequence = origin &+ UInt16(offset)
        let outcome = tracker.record(sequence: sequence, rtpTimestamp: UInt32(offset) * 3000, arrival: UInt32(packets) * 3000)
        packets += 1
        let expectedOutcome: RTPSequenceTracker.Outcome
        if seen.isEmpty {
            expectedOutcome = .first
        } else if seen.contains(offset) {
            expectedOutcome = .duplicate
        } else if offset > highest {
            expectedOutcome = .inOrder
        } else {
            expectedOutcome = .reordered
        }
        switch expectedOutcome {
        case .duplicate: duplicates += 1
        case .reordered: reordered += 1
        default: break
        }
        if expectedOutcome != .duplicate {
            seen.insert(offset)
            lowest = min(lowest, offset)
            highest = max(highest, offset)
        }
        fuzzCheck(outcome == expectedOutcome, "packet \(packets) (offset \(offset), sequence \(sequence)): \(outcome), model says \(expectedOutcome)")
        fuzzCheck(tracker.received == seen.count, "received \(tracker.received), model \(seen.count)")
        fuzzCheck(tracker.duplicate == duplicates, "duplicate \(tracker.duplicate), model \(duplicates)")
        fuzzCheck(tracker.reordered == reordered, "reordered \(tracker.reordered), model \(reordered)")
        fuzzCheck(tracker.expected == Int64(highest - lowest + 1), "expected \(tracker.expected), model \(highest - lowest + 1)")
        fuzzCheck(tracker.lost == Int64(highest - lowest + 1 - seen.count), "lost \(tracker.lost)")
        fuzzCheck(tracker.late == 0 && tracker.sequenceJump == 0 && tracker.restarts == 0, "jump in a span of \(span)")
        invariants(tracker)
    }
    if !seen.isEmpty {
        let missing = tracker.missingSequences(limit: 4096)
        let modelMissing = (lowest...highest).filter { !seen.contains($0) }.map { origin &+ UInt16($0) }
        fuzzCheck(missing == Array(modelMissing.suffix(4096)), "missingSequences \(missing), model \(modelMissing)")
        fuzzCheck(tracker.extendedHighestSequence.map { Int($0) - Int(origin &+ UInt16(first!)) }
                  == highest - first!, "extendedHighestSequence \(String(describing: tracker.extendedHighestSequence))")
    }
}
