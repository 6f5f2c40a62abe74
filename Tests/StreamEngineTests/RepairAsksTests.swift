@testable import StreamEngine
import MediaFormats
import TestSupport
import Testing

/// The derived playout latency on a path where asks fail often: room for as many asks per loss
/// as keep the losses left unrepaired to about 1 % (`LossRecovery.repairRounds`), where two
/// asks (3 x RTT) would leave several times that.
@Suite struct RepairAsksTests {
    static let millisecond = ReceiveSessionTests.millisecond

    /// A 30 fps stream, each frame's packets 1 ms apart from its capture time, through a link
    /// that drops originals and answers at the rates given (a seeded generator: the same drops
    /// for every latency), answers `rtxDelay` after each NACK.
    static func run(frames count: Int, originalLoss: Double, answerLoss: Double, latency: Duration?,
                    rtxDelay: Int64 = 8 * millisecond) -> (stats: ReceiverStats, units: [DepacketizedAccessUnit]) {
        let frames = LossRecoveryTests.stream(frames: count)
        var link = LossRecoveryTests.Link(latency: latency, rtxDelay: rtxDelay)
        var originals = SplitMix64(seed: 7)
        let answers = SeededDraws(seed: 11)
        link.answer = { _ in answers.next() >= answerLoss }
        let frameInterval: Int64 = 1_000_000_000 / 30
        for (index, frame) in frames.enumerated() {
            let start = ReceiveSessionTests.start + Int64(index) * frameInterval
            for (number, datagram) in frame.datagrams.enumerated() {
                link.history[try! RTPHeader.parse(datagram).header.sequenceNumber] = datagram
                // Never the stream's first packet: the loss shows as a gap only after it.
                if index > 0, Double.random(in: 0..<1, using: &originals) < originalLoss { continue }
                link.arrive(datagram, at: start + Int64(number + 1) * millisecond)
            }
        }
        link.run()
        return (link.stats, link.units)
    }

    /// Originals lost at 20 % and a third of the answers lost in turn: an ask fails about one
    /// time in three, two asks leave ~10 % of the losses unrepaired. The derived latency makes
    /// room for four or more (the reorder allowance, three re-ask delays, an RTT: above both
    /// the 50 ms floor and 3 x RTT), and fewer frames go out incomplete than at the latency the
    /// 3 x RTT rule gives on this path (its 50 ms floor), with the very same drops.
    @Test func asksThatFailOftenGetRoomForMore() throws {
        let derived = Self.run(frames: 300, originalLoss: 0.2, answerLoss: 0.33, latency: nil)
        let floor = Self.run(frames: 300, originalLoss: 0.2, answerLoss: 0.33, latency: .milliseconds(50))
        let stats = derived.stats
        let asks = try #require(stats.playoutRepairAsks)
        #expect(asks >= 4 && asks <= LossRecovery.maxRepairRounds)
        // The RTT is the answers' 8 ms, not lengthened by the re-asks of failed asks (taken
        // from the first ask, it read 160 ms here: `LossRecovery.noteRoundTrip`).
        let rtt = try #require(stats.retransmissionRTTMs)
        #expect(rtt >= 8 && rtt < 10)
        let target = try #require(stats.playoutLatencyTargetMs)
        // Reorder allowance (5 ms) + (asks - 1) re-ask delays (1.25 x the RTT with its
        // deviation, + 1 ms: at least 1.25 x the 8 ms answer delay + 1) + the RTT.
        #expect(target >= 5 + Double(asks - 1) * (1.25 * 8 + 1) + rtt)
        #expect(target > max(50, 3 * rtt))
print("derived: target \(target) ms, asks \(asks), rtt \(rtt) ms, incomplete \(stats.framesIncomplete), recovered \(stats.recovered); at 50 ms: incomplete \(floor.stats.framesIncomplete), recovered \(floor.stats.recovered)")
        // The same originals were lost in both runs; more of them came back with more room.
        #expect(stats.lost == floor.stats.lost && stats.lost > 100)
        #expect(stats.recovered > floor.stats.recovered)
        #expect(stats.framesIncomplete * 2 < floor.stats.framesIncomplete)
        // A configured latency is kept as it is.
        #expect(floor.stats.playoutLatencyTargetMs == 50 && floor.stats.playoutRepairAsks == nil)
    }

    /// Where answers are rarely lost (one in twenty), two asks leave well under 1 % unrepaired:
    /// the 3 x RTT rule (here its 50 ms floor) stands.
    @Test func asksThatMostlySucceedKeepTheThreeRoundTripRule() throws {
        let run = Self.run(frames: 150, originalLoss: 0.2, answerLoss: 0.05, latency: nil)
        #expect(run.stats.playoutRepairAsks == nil)
        #expect(run.stats.recovered > 50)
        // The answers' 8 ms, measured: 3 x RTT + jitter is under the 50 ms floor.
        let rtt = try #require(run.stats.retransmissionRTTMs)
        #expect(rtt >= 8 && rtt < 9)
        #expect(run.stats.playoutLatencyTargetMs == 50)
    }

    /// A sender that answers no NACK (one without retransmission): no ask ever succeeds, and
    /// no room for more asks is made, which would only delay every frame for nothing: the
    /// target stays 3 x the 50 ms RTT assumed until one is measured.
    @Test func asksNeverAnsweredChangeNothing() {
        let run = Self.run(frames: 150, originalLoss: 0.2, answerLoss: 1.0, latency: nil)
        #expect(run.stats.recovered == 0 && run.stats.nackRequested > 50 && run.stats.retransmissionRTTMs == nil)
        // 3 x the 50 ms assumed and the stream's jitter (its packets are a millisecond apart
        // from their capture times: about a millisecond).
        let target = run.stats.playoutLatencyTargetMs ?? 0
        #expect(run.stats.playoutRepairAsks == nil && target >= 150 && target < 155)
    }

    /// The estimate follows the path: after asks stopped failing, the extra room goes.
    @Test func theRoomGoesWhenAsksStopFailing() {
        var recovery = LossRecovery(latency: nil)
        for sequence in 0..<200 {
            recovery.noteAsks(1)
            if sequence % 3 != 0 { recovery.noteRecovered(Int64(sequence)) }  // a third fail
        }
        #expect(recovery.repairRounds == 5)  // (1/3)^4 > 1 %, (1/3)^5 < 1 %
        let floorRule = max(LossRecovery.minimumLatency, 3 * recovery.rtt)
        #expect(recovery.targetLatency > floorRule)
        for sequence in 200..<1_000 {
            recovery.noteAsks(1)
            recovery.noteRecovered(Int64(sequence))
        }
        #expect(recovery.repairRounds == nil && recovery.targetLatency == floorRule)
    }
}

/// Uniform draws in 0..<1 from a seeded generator, for a closure that cannot be mutating.
final class SeededDraws: @unchecked Sendable {
    private var generator: SplitMix64
    init(seed: UInt64) { generator = SplitMix64(seed: seed) }
    func next() -> Double { Double.random(in: 0..<1, using: &generator) }
}
