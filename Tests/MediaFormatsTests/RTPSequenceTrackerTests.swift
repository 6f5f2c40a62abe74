import Testing
import TestSupport
@testable import MediaFormats

private extension RTPSequenceTracker {
    @discardableResult
    mutating func record(_ sequence: UInt16) -> Outcome {
        record(sequence: sequence, rtpTimestamp: UInt32(sequence) &* 3000, arrival: UInt32(sequence) &* 3000)
    }
}

@Suite("RTP sequence tracker")
struct RTPSequenceTrackerTests {
    @Test func inOrder() {
        var tracker = RTPSequenceTracker()
        #expect(tracker.record(1000) == .first)
        for sequence in UInt16(1001)...1099 { #expect(tracker.record(sequence) == .inOrder) }
        #expect(tracker.received == 100 && tracker.lost == 0 && tracker.expected == 100)
        #expect(tracker.extendedHighestSequence == 1099)
        #expect(tracker.jitter == 0)
        #expect(tracker.missingSequences(limit: 10).isEmpty)
    }

    @Test func lossAndLateArrivalLeavesLost() {
        var tracker = RTPSequenceTracker()
        for sequence: UInt16 in [1, 2, 5, 6, 9] { tracker.record(sequence) }
        #expect(tracker.lost == 4)
        #expect(tracker.missingSequences(limit: 10) == [3, 4, 7, 8])
        #expect(tracker.missingSequences(limit: 2) == [7, 8])
        #expect(tracker.record(4) == .reordered)
        #expect(tracker.lost == 3)
        #expect(tracker.reordered == 1)
        #expect(tracker.missingSequences(limit: 10) == [3, 7, 8])
    }

    @Test func duplicates() {
        var tracker = RTPSequenceTracker()
        for sequence: UInt16 in [10, 11, 11, 12, 10, 12] { tracker.record(sequence) }
        #expect(tracker.received == 3 && tracker.duplicate == 3 && tracker.lost == 0)
    }

    @Test func wrapAt65535() {
        var tracker = RTPSequenceTracker()
        for sequence: UInt16 in [65533, 65534, 65535, 0, 2, 1] { tracker.record(sequence) }
        #expect(tracker.extendedHighestSequence == 65536 + 2)
        #expect(tracker.received == 6 && tracker.lost == 0 && tracker.reordered == 1)
        // A packet from before the first, across the wrap, extends the start downwards.
        var joined = RTPSequenceTracker()
        for sequence: UInt16 in [1, 3, 65535] { joined.record(sequence) }
        #expect(joined.expected == 5 && joined.received == 3 && joined.lost == 2)
        #expect(joined.missingSequences(limit: 10) == [0, 2])
    }

    @Test func joiningMidStreamDoesNotCountEarlierPacketsLost() {
        var tracker = RTPSequenceTracker()
        tracker.record(40_000)
        tracker.record(40_001)
        #expect(tracker.lost == 0 && tracker.expected == 2)
    }

    @Test func singleHugeJumpIsIgnored() {
        var tracker = RTPSequenceTracker()
        for sequence in UInt16(0)..<10 { tracker.record(sequence) }
        #expect(tracker.record(20_000) == .sequenceJump)
        #expect(tracker.record(10) == .inOrder)
        #expect(tracker.record(30_000) == .sequenceJump)
        #expect(tracker.record(11) == .inOrder)
        #expect(tracker.sequenceJump == 2 && tracker.restarts == 0)
        #expect(tracker.received == 12 && tracker.lost == 0)
    }

    @Test func repeatedJumpRestarts() {
        var tracker = RTPSequenceTracker()
        for sequence in UInt16(0)..<10 { tracker.record(sequence) }
        tracker.record(12)  // two lost before the restart
        #expect(tracker.record(40_000) == .sequenceJump)
        #expect(tracker.record(40_001) == .restarted)
        #expect(tracker.record(40_003) == .inOrder)
        #expect(tracker.restarts == 1 && tracker.sequenceJump == 1)
        #expect(tracker.received == 14)
        #expect(tracker.expected == 13 + 4)
        #expect(tracker.lost == 3)
        #expect(tracker.extendedHighestSequence == 40_003)
        #expect(tracker.missingSequences(limit: 5) == [40_002])
    }

    @Test func packetsOlderThanTheWindowAreLateNotDoubleCounted() {
        var tracker = RTPSequenceTracker()
        for sequence in UInt16(0)..<5000 where sequence != 100 { tracker.record(sequence) }
        #expect(tracker.lost == 1)
        #expect(tracker.record(100) == .late)
        #expect(tracker.record(200) == .late)  // a duplicate of an old one: also just late
        #expect(tracker.late == 2 && tracker.received == 4999 && tracker.duplicate == 0 && tracker.lost == 1)
        #expect(tracker.record(5000) == .inOrder)
        #expect(tracker.restarts == 0)
    }

    @Test func jitterFollowsRFC3550() {
        var tracker = RTPSequenceTracker()
        // Packets 3000 ticks apart on the media clock, arriving with alternating 0/90 ticks extra delay.
        for index in 0..<200 {
            let delay: UInt32 = index % 2 == 0 ? 0 : 90
            tracker.record(
                sequence: UInt16(index), rtpTimestamp: UInt32(index) * 3000,
                arrival: 1_000_000 &+ UInt32(index) * 3000 + delay)
        }
        // Every transit difference is 90: jitter converges towards 90.
        #expect(tracker.jitter >= 85 && tracker.jitter <= 90)
    }

    @Test func reportBlock() throws {
        var tracker = RTPSequenceTracker()
        #expect(tracker.makeReportBlock(ssrc: 1, lastSR: 0, delaySinceLastSR: 5) == nil)
        for sequence: UInt16 in [0, 1, 2, 3] { tracker.record(sequence) }  // 4 of 4
        let firstBlock = tracker.makeReportBlock(ssrc: 7, lastSR: 0, delaySinceLastSR: 5)
        let first = try #require(firstBlock)
        #expect(first.fractionLost == 0 && first.cumulativeLost == 0 && first.delaySinceLastSR == 0)
        for sequence: UInt16 in [4, 7] { tracker.record(sequence) }  // 2 of 4: half lost
        let secondBlock = tracker.makeReportBlock(ssrc: 7, lastSR: 0x1234_5678, delaySinceLastSR: 0x8000)
        let second = try #require(secondBlock)
        #expect(second.fractionLost == 128)
        #expect(second.cumulativeLost == 2)
        #expect(second.extendedHighestSequence == 7)
        #expect(second.lastSR == 0x1234_5678 && second.delaySinceLastSR == 0x8000)
        // The missing ones arrive late: interval loss is negative, reported as 0.
        tracker.record(5)
        tracker.record(6)
        let thirdBlock = tracker.makeReportBlock(ssrc: 7, lastSR: 0, delaySinceLastSR: 0)
        let third = try #require(thirdBlock)
        #expect(third.fractionLost == 0 && third.cumulativeLost == 0)
    }

    /// 100,000 packets with loss, reordering and duplicates across several wraps, checked
    /// against a Set-based model of the same arrivals.
    @Test func randomStreamMatchesModel() {
        var generator = SplitMix64(seed: 2024)
        let start: Int64 = 60_000
        var arrivals = [Int64]()
        var index: Int64 = 0
        while arrivals.count < 100_000 {
            let roll = generator.next() % 100
            if roll < 10 {
                // lost
            } else if roll < 15 {
                arrivals.append(start + index)
                arrivals.append(start + index)  // duplicated
            } else {
                arrivals.append(start + index)
            }
            index += 1
        }
        // Reorder: swap neighbours up to 40 positions apart.
        for position in 0..<arrivals.count where generator.next() % 10 == 0 {
            let other = min(arrivals.count - 1, position + Int(generator.next() % 40))
            arrivals.swapAt(position, other)
        }
        var tracker = RTPSequenceTracker()
        var distinct = Set<Int64>()
        for extended in arrivals {
            tracker.record(UInt16(truncatingIfNeeded: extended))
            distinct.insert(extended)
        }
        let expected = distinct.max()! - distinct.min()! + 1
        #expect(tracker.received == distinct.count)
        #expect(tracker.duplicate == arrivals.count - distinct.count)
        #expect(tracker.lost == expected - Int64(distinct.count))
        #expect(tracker.expected == expected)
        #expect(tracker.late == 0 && tracker.sequenceJump == 0 && tracker.restarts == 0)
        #expect(Int64(tracker.extendedHighestSequence!) - Int64(UInt16(truncatingIfNeeded: arrivals[0])) == distinct.max()! - arrivals[0])
        // The NACK list matches the model's gaps in the last part of the stream.
        let highest = distinct.max()!
        let modelMissing = (highest - 500...highest).filter { !distinct.contains($0) }.map { UInt16(truncatingIfNeeded: $0) }
        #expect(tracker.missingSequences(limit: modelMissing.count) == modelMissing)
    }

    @Test func randomGarbageStaysBounded() {
        var generator = SplitMix64(seed: 99)
        var tracker = RTPSequenceTracker()
        for _ in 0..<50_000 {
            tracker.record(
                sequence: UInt16(truncatingIfNeeded: generator.next()),
                rtpTimestamp: UInt32(truncatingIfNeeded: generator.next()),
                arrival: UInt32(truncatingIfNeeded: generator.next()))
        }
        #expect(tracker.packetsRecorded == 50_000)
        #expect(tracker.lost >= 0)
        // Each packet lands in exactly one bucket; a restart also accepts the jump packet before it.
        #expect(tracker.received + tracker.duplicate + tracker.sequenceJump - tracker.restarts == 50_000)
        _ = tracker.makeReportBlock(ssrc: 1, lastSR: 1, delaySinceLastSR: 1)
    }
}
