import MediaFormats
import Testing
import TestSupport
@testable import StreamEngine

/// The jitter buffer's clocks on their own: `FramePlayout` (a frame's playout time from its
/// first packet's arrival), `PlayoutLatency` (the latency in use following its target) and
/// `PlayoutBuffer` (packets in order, held behind a gap).
/// Both skip their dictionaries on the usual path (packets of one frame in a row, nothing
/// missing); these check that the skipping never changes what they answer.
@Suite struct PlayoutStateTests {
    static let latency: Int64 = 50_000_000

    static func unit(_ timestamp: UInt32) -> DepacketizedAccessUnit {
        DepacketizedAccessUnit(timestamp: timestamp, nalUnits: [[2, 1, 0xAB]], isComplete: true, isKeyframe: false,
                               firstSequence: 0, lastSequence: 0, packetCount: 1, missingPackets: 0)
    }

    @Test func aFramesFirstArrivalIsItsEarliestPacketsWhateverTheOrderTheyAreNoted() {
        var playout = FramePlayout()
        playout.noteArrival(timestamp: 3000, arrival: 1_000)
        playout.noteArrival(timestamp: 3000, arrival: 1_500)
        playout.noteArrival(timestamp: 3000, arrival: 900)  // an earlier kernel timestamp, noted later
        playout.noteArrival(timestamp: 3000, arrival: 950)
        playout.noteArrival(timestamp: 6000, arrival: 2_000)
        playout.noteArrival(timestamp: 3000, arrival: 800)  // back to the first frame after another
        playout.noteArrival(timestamp: 6000, arrival: 1_900)
        playout.noteArrival(timestamp: 6000, arrival: 2_100)

        playout.hold(Self.unit(3000), now: 10_000)
        playout.hold(Self.unit(6000), now: 10_000)
        #expect(playout.nextFirstArrival == 800)
        var out: [UInt32] = []
        playout.release(now: 800 + Self.latency, latency: Self.latency) { out.append($0.timestamp) }
        #expect(out == [3000])
        #expect(playout.nextFirstArrival == 1_900)
    }

    @Test func aTimestampSeenAgainAfterItsFrameWentOutStartsAfresh() {
        var playout = FramePlayout()
        playout.noteArrival(timestamp: 3000, arrival: 1_000)
        playout.hold(Self.unit(3000), now: 2_000)
        #expect(playout.nextFirstArrival == 1_000)
        playout.release(now: Int64.max, latency: Self.latency, all: true) { _ in }
        // A frame of the same timestamp again (a sender that restarted its clock, or a late
        // packet of a frame already out): its own first arrival, not the one of the frame that went out.
        playout.noteArrival(timestamp: 3000, arrival: 5_000)
        playout.noteArrival(timestamp: 3000, arrival: 5_100)
        playout.hold(Self.unit(3000), now: 9_000)
        #expect(playout.nextFirstArrival == 5_000)
    }

    @Test func aFrameWithoutNotedArrivalsWaitsFromWhenItCameOut() {
        var playout = FramePlayout()
        playout.noteArrival(timestamp: 3000, arrival: 1_000)
        playout.hold(Self.unit(3000), now: 2_000)
        playout.hold(Self.unit(3000), now: 7_000)  // nothing noted for it since: from now
        var firsts: [Int64] = []
        while let first = playout.nextFirstArrival {
            firsts.append(first)
            playout.release(now: first + Self.latency, latency: Self.latency) { _ in }
        }
        #expect(firsts == [1_000, 7_000])
    }

    /// The release time a frame is given is the first time at which it is due by the latency
    /// `follow` gives then: growing, shrinking, reaching the target on the way, or already due.
    @Test(arguments: [(150, 950), (950, 150), (300, 310), (310, 300), (200, 200)])
    func aFrameIsDueAtItsReleaseTimeAndNotBefore(from: Int64, to: Int64) {
        let ms: Int64 = 1_000_000
        var rng = SplitMix64(seed: 7)
        for _ in 0..<2_000 {
            var latency = PlayoutLatency()
            let start: Int64 = 1_700_000_000_000_000_000  // CLOCK_REALTIME, as kernel timestamps
            latency.follow(from * ms, now: start)
            let moved = start + Int64.random(in: 0...(2_000 * ms), using: &rng)
            latency.follow(to * ms, now: moved)
            let firstArrival = moved + Int64.random(in: -(1_500 * ms)...(200 * ms), using: &rng)
            let release = latency.releaseTime(firstArrival: firstArrival, target: to * ms)
            func isDue(at time: Int64) -> Bool {
                var copy = latency
                return firstArrival + copy.follow(to * ms, now: time) <= time
            }
            #expect(isDue(at: release))
            if release > moved { #expect(!isDue(at: release - 2)) }
            // Never sooner than the lesser of the two latencies, never later than the greater.
            #expect(release - firstArrival <= max(latency.current!, to * ms) || release <= moved)
        }
        // It moves by a tenth of the time that passes, and stops at the target.
        var latency = PlayoutLatency()
        latency.follow(from * ms, now: 0)
        let halfway = latency.follow(to * ms, now: 1_000 * ms)
        #expect(halfway == (from < to ? min(to, from + 100) : max(to, from - 100)) * ms)
        #expect(latency.follow(to * ms, now: 20_000 * ms) == to * ms)
    }

    static func packet(_ sequence: Int64) -> PlayoutBuffer.Packet {
        PlayoutBuffer.Packet(header: RTPHeader(marker: false, payloadType: 96, sequenceNumber: UInt16(truncatingIfNeeded: sequence),
                                               timestamp: 0, ssrc: 1),
                             payload: [UInt8(truncatingIfNeeded: sequence)], sequence: sequence)
    }

    @Test func packetsInOrderGoStraightOutAndDuplicatesAreToldApartFromGaps() {
        var buffer = PlayoutBuffer()
        var out: [PlayoutBuffer.Packet] = []
        // The start is held (half the latency here; at most `startHold`): a packet reordered
        // ahead of the first one still starts the stream. After the hold, one is `beforeStart`.
        for sequence: Int64 in 10...12 {
            #expect(buffer.insert(Self.packet(sequence), arrival: 0, latency: 100, into: &out) == .accepted)
        }
        #expect(out.isEmpty && buffer.nextDeadline == 50 && !buffer.isCaughtUp(at: 12))
        #expect(buffer.insert(Self.packet(9), arrival: 10, latency: 100, into: &out) == .accepted)
        buffer.release(now: 49, into: &out)
        #expect(out.isEmpty)
        buffer.release(now: 50, into: &out)
        #expect(out.map(\.sequence) == [9, 10, 11, 12] && buffer.isCaughtUp(at: 12))
        #expect(buffer.insert(Self.packet(8), arrival: 60, latency: 100, into: &out) == .beforeStart)
        #expect(buffer.insert(Self.packet(11), arrival: 60, latency: 100, into: &out) == .duplicate)
        #expect(!buffer.isMissing(11) && !buffer.isMissing(13) && buffer.nextDeadline == nil)

        // A gap: 13 and 14 missing behind 15, which waits.
        out.removeAll()
        #expect(buffer.insert(Self.packet(15), arrival: 1_000, latency: 100, into: &out) == .accepted)
        #expect(out.isEmpty && buffer.heldCount == 1)
        #expect(buffer.isMissing(13) && buffer.isMissing(14) && !buffer.isMissing(15) && !buffer.isMissing(12))
        #expect(buffer.nextDeadline == 1_100)
        #expect(buffer.insert(Self.packet(15), arrival: 1_010, latency: 100, into: &out) == .duplicate)
        #expect(buffer.insert(Self.packet(12), arrival: 1_010, latency: 100, into: &out) == .duplicate)

        // 14 fills part of it (held too), 13 the rest: all three go out in order.
        #expect(buffer.insert(Self.packet(14), arrival: 1_020, latency: 100, into: &out) == .accepted)
        #expect(out.isEmpty && buffer.heldCount == 2 && !buffer.isMissing(14) && buffer.isMissing(13))
        #expect(buffer.insert(Self.packet(13), arrival: 1_030, latency: 100, into: &out) == .accepted)
        #expect(out.map(\.sequence) == [13, 14, 15] && out.map(\.payload) == [[13], [14], [15]])
        #expect(buffer.heldCount == 0 && !buffer.isMissing(13) && buffer.nextDeadline == nil)
        #expect(buffer.insert(Self.packet(14), arrival: 1_040, latency: 100, into: &out) == .duplicate)

        // A gap given up at its deadline: what waited goes out, and the missing one is late.
        out.removeAll()
        #expect(buffer.insert(Self.packet(17), arrival: 2_000, latency: 100, into: &out) == .accepted)
        buffer.release(now: 2_099, into: &out)
        #expect(out.isEmpty)
        buffer.release(now: 2_100, into: &out)
        #expect(out.map(\.sequence) == [17] && buffer.gaveUp == 1 && !buffer.isMissing(16))
        #expect(buffer.insert(Self.packet(16), arrival: 2_200, latency: 100, into: &out) == .late)
        #expect(buffer.insert(Self.packet(18), arrival: 2_300, latency: 100, into: &out) == .accepted)
        #expect(out.map(\.sequence) == [17, 18])
    }

    /// A stream of 300 packets, some lost, some twice, each arriving up to 8 places early or
    /// late (the first one first), into a buffer whose gaps never time out: after every
    /// arrival what came out is 0, 1, 2, ... with each one's own bytes, what waits is every
    /// packet that came past the first gap, and what is missing is exactly what has not come
    /// between the next one out and the highest. At the end the lost ones are given up and
    /// everything that came is out, once, in order.
    @Test(arguments: 0..<24 as Range<UInt64>)
    func aShuffledStreamComesOutInOrderEachPacketOnce(seed: UInt64) {
        let arrivals = Self.shuffledArrivals(seed: seed)
        var buffer = PlayoutBuffer()
        var out: [PlayoutBuffer.Packet] = []
        var arrived = Set<Int64>()
        var highest: Int64 = 0
        for (index, sequence) in arrivals.enumerated() {
            let result = buffer.insert(Self.packet(sequence), arrival: Int64(index) * 1_000, latency: 1 << 40, into: &out)
            #expect(result == (arrived.contains(sequence) ? .duplicate : .accepted), "packet \(sequence)")
            arrived.insert(sequence)
            highest = max(highest, sequence)
            #expect(out.map(\.sequence) == Array(0..<Int64(out.count)))
            #expect(out.allSatisfy { $0.payload == [UInt8(truncatingIfNeeded: $0.sequence)] })
            #expect(buffer.heldCount == arrived.count - out.count)
            let waiting = Int64(out.count) <= highest ? Array(Int64(out.count)...highest) : []
            #expect(waiting.filter { buffer.isMissing($0) } == waiting.filter { !arrived.contains($0) })
        }
        let lost = (0...highest).filter { !arrived.contains($0) }.count
        buffer.release(now: 1 << 41, into: &out)
        #expect(out.map(\.sequence) == arrived.sorted())
        #expect(buffer.gaveUp == lost && buffer.heldCount == 0 && buffer.nextDeadline == nil)
    }

    /// Sequence numbers 0..<300 as they arrive: some lost (1 in 20), some twice (1 in 20), each
    /// (but the first, which comes first) swapped with one up to `reorder` places on.
    static func shuffledArrivals(seed: UInt64, reorder: Int = 8) -> [Int64] {
        var random = SplitMix64(seed: seed)
        var arrivals: [Int64] = [0]
        for sequence: Int64 in 1..<300 {
            let draw = Int.random(in: 0..<20, using: &random)
            if draw == 0 { continue }  // lost
            arrivals.append(sequence)
            if draw == 1 { arrivals.append(sequence) }  // twice
        }
        for index in 1..<arrivals.count {
            let other = min(arrivals.count - 1, index + Int.random(in: 0...reorder, using: &random))
            arrivals.swapAt(index, other)
        }
        return arrivals
    }

    /// `releaseInOrder` takes a packet only where `insert` would release it at once and alone,
    /// and leaves the buffer as `insert` would: two buffers fed the same shuffled streams (with
    /// gaps that time out and missing tails, so both paths run after gaps were given up), one trying
    /// `releaseInOrder` first, release the same packets and agree on every answer after every
    /// arrival and every release of due gaps.
    @Test(arguments: 0..<24 as Range<UInt64>)
    func releasingInOrderChangesNothingInsertWouldNot(seed: UInt64) {
        let reorder = [0, 2, 4, 12][Int(seed % 4)]
        let arrivals = Self.shuffledArrivals(seed: seed, reorder: reorder)
        var fast = PlayoutBuffer(), plain = PlayoutBuffer()
        var fastOut: [Int64] = [], plainOut: [PlayoutBuffer.Packet] = []
        var taken = 0
        let latency: Int64 = 5_000
        for (index, sequence) in arrivals.enumerated() {
            let now = Int64(index) * 1_000
            if fast.releaseInOrder(sequence) {
                taken += 1
                fastOut.append(sequence)
            } else {
                var out: [PlayoutBuffer.Packet] = []
                _ = fast.insert(Self.packet(sequence), arrival: now, latency: latency, into: &out)
                fastOut += out.map(\.sequence)
            }
            _ = plain.insert(Self.packet(sequence), arrival: now, latency: latency, into: &plainOut)
            // Now and then the sender's report says two more were sent (a missing tail), given
            // up later: the next packet in line may then be one the buffer waits for.
            if index % 50 == 25 {
                let last = plain.highestSequence + 2
                fast.expectTail(through: last, deadline: now + latency)
                plain.expectTail(through: last, deadline: now + latency)
            } else if index % 50 == 45 {
                fast.giveUpTail(through: plain.highestSequence + 1)
                plain.giveUpTail(through: plain.highestSequence + 1)
            }
            if index % 3 == 2 {
                var out: [PlayoutBuffer.Packet] = []
                fast.release(now: now, into: &out)
                fastOut += out.map(\.sequence)
                plain.release(now: now, into: &plainOut)
            }
            #expect(fastOut == plainOut.map(\.sequence), "seed \(seed), arrival \(index)")
            #expect(fast.nextSequence == plain.nextSequence && fast.highestSequence == plain.highestSequence)
            #expect(fast.heldCount == plain.heldCount && fast.gaveUp == plain.gaveUp && fast.nextDeadline == plain.nextDeadline)
            #expect(fast.deadlines == plain.deadlines)
        }
        // Both paths ran: the first packet always goes through `insert`, and with reordering
        // up to 4 places packets also come next in line with nothing missing (up to 12, a gap
        // may always be open).
        #expect(reorder > 4 || taken > 0, "\(taken) of \(arrivals.count) taken in order")
    }

    /// The NACK generator's next ask: none with nothing missing; the earliest of the gaps'
    /// reorder allowances before they are asked for, and of their asks again after.
    @Test func theNextAskIsTheEarliestOfTheGapsDueTimes() {
        var nack = NACKGenerator()
        let rtt: Int64 = 20_000_000
        #expect(nack.nextDue(rtt: rtt) == nil)
        nack.noteMissing(10..<12, now: 1_000_000, deadline: 500_000_000)
        nack.noteMissing(20..<21, now: 3_000_000, deadline: 500_000_000)
        #expect(nack.nextDue(rtt: rtt) == 1_000_000 + nack.reorderTime)
        nack.noteMediaBytes(100_000)
        // 10 and 11 are beyond the reorder allowance (highest 15), 20 is not yet.
        let asked = nack.due(now: 2_000_000, highest: 15, rtt: rtt).flatMap(\.sequenceNumbers)
        #expect(asked == [10, 11])
        #expect(nack.nextDue(rtt: rtt) == min(3_000_000 + nack.reorderTime, 2_000_000 + nack.reaskDelay(rtt: rtt)))
        nack.remove(20)
        #expect(nack.nextDue(rtt: rtt) == 2_000_000 + nack.reaskDelay(rtt: rtt))
        nack.remove(10)
        nack.remove(11)
        #expect(nack.nextDue(rtt: rtt) == nil)
    }
}
