@testable import StreamEngine
import Testing

/// The media's target under the controller's (`MediaRateControl`): room for retransmissions,
/// and less while frames wait long in the sender's queue.
@Suite struct MediaRateControlTests {
    static let frame: Int64 = 33_333_333
    static let allowance: Int64 = 125_000_000

    /// 10 % of the bytes sent are retransmissions: the media gets the target over 1.1, the
    /// share taken in halves each half second (0.05, then 0.075, ...); none retransmitted
    /// since, and it goes back.
    @Test func retransmissionsGetTheirShareOfTheTarget() {
        var control = MediaRateControl(allowance: Self.allowance)
        var media = 0
        var retransmitted = 0
        var now: Int64 = 0
        control.sent(mediaBytes: media, retransmittedBytes: retransmitted, at: now)
        #expect(control.mediaTarget(4_000_000, minimum: 150_000) == 4_000_000)
        for _ in 0..<10 {
            now += MediaRateControl.sharePeriod
            media += 250_000
            retransmitted += 25_000
            control.sent(mediaBytes: media, retransmittedBytes: retransmitted, at: now)
        }
        #expect(abs(control.retransmissionShare - 0.1) < 0.001)
        #expect(abs(control.mediaTarget(4_000_000, minimum: 150_000) - 3_636_363) <= 400)
        // Sampled sooner than a period: nothing changes.
        control.sent(mediaBytes: media + 1_000, retransmittedBytes: retransmitted + 1_000, at: now + 1_000_000)
        #expect(abs(control.retransmissionShare - 0.1) < 0.001)
        for _ in 0..<10 {
            now += MediaRateControl.sharePeriod
            media += 250_000
            control.sent(mediaBytes: media, retransmittedBytes: retransmitted, at: now)
        }
        #expect(control.retransmissionShare < 0.001)
    }

    /// Frames every 33 ms. Waits up to the allowance (a keyframe's backlog, 100 ms) change
    /// nothing; a wait of 300 ms lowers the media's target frame by frame to the most (1 / 1.5
    /// of the controller's, never under the minimum), and once the queue is empty again the
    /// target is whole within three frames.
    @Test func framesWaitingLongLowerTheTargetUntilTheQueueEmpties() {
        var control = MediaRateControl(allowance: Self.allowance)
        var now: Int64 = 0
        func frame(waiting: Int64) {
            now += Self.frame
            control.frameQueued(at: now, queueDelay: waiting)
        }
        for _ in 0..<30 { frame(waiting: 100_000_000) }
        #expect(control.factor == 0 && control.mediaTarget(4_000_000, minimum: 150_000) == 4_000_000)
        var targets: [Int] = []
        for _ in 0..<6 {
            frame(waiting: 300_000_000)
            targets.append(control.mediaTarget(4_000_000, minimum: 150_000))
        }
        #expect(zip(targets, targets.dropFirst()).allSatisfy { $0.0 >= $0.1 } && targets[0] < 4_000_000)
        #expect(control.factor == MediaRateControl.maxFactor && targets.last == 2_666_666)
        #expect(control.mediaTarget(200_000, minimum: 150_000) == 150_000)
        for _ in 0..<3 { frame(waiting: 0) }
        #expect(control.factor == 0)
        // Frames handed over together say nothing of the period.
        let period = control.framePeriod
        control.frameQueued(at: now, queueDelay: 0)
        #expect(control.framePeriod == period)
    }
}
