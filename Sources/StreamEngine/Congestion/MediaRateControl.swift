/// The media's target under a congestion controller's: what the encoder is asked for, so that
/// the media, its retransmissions and its frame bursts fit the pace and window the controller
/// set (SCReAM v2 sets the media's rate the same way: draft-ietf-ccwg-rfc8298bis-screamv2,
/// "Media Rate Control" and "Discussion").
///
/// - Retransmissions share the flow's pace and window (`MediaFlow.retransmissionBytesInFlight`),
///   so the media gets the controller's target over (1 + their share of the bytes sent,
///   measured every half second). With the pace only 5 % over the target, an encoder at the
///   full target under 10 % random loss filled the sender's queue at ~5 % of the rate, and
///   its frames aged out (`MediaSenderConfig.maxFrameWait`) 16 at a time.
/// - Where the window binds (random loss keeps cutting it, a bottleneck narrowed) the flow
///   carries less than the target (the window over the feedback delay): in flight climbs from
///   none to the window between two reports, so its mean, which with the feedback delay sets
///   the rate (Little's law), is well under the window. SCReAM v2's rate-adjust factor, an
///   integral controller on the sender queue's delay (gain 1/16 a frame, at most 0.5),
///   lowers the media's target while frames wait. Here it answers only a wait over
///   `allowance` (a quarter of `maxFrameWait`: the wait the flow's backlog pacing drains
///   within, `SenderFlow.pace`), not SCReAM's quarter frame: paced 5 % over the target,
///   a frame takes most of a frame interval to leave and a keyframe several, and at the
///   quarter frame the factor held an unimpaired lab stream (640x360, 4 Mbit/s, 150 frames)
///   to 81-82 % of the bytes it sends without it. The
///   factor goes back at about a quarter a frame once nothing waits that long. In the
///   simulated LAN of `Tests/StreamEngineTests/CongestionControllerTests.swift` at 10 and 20 %
///   random loss, the longest wait in the sender fell from 420 ms and 1.9 s to 230 and 460 ms.
struct MediaRateControl: Sendable {
    /// The gain per frame on the queue's delay in frame periods (SCReAM v2: 1/16).
    static let gain = 1.0 / 16
    /// The largest factor: the media's target at least 1 / 1.5 of the controller's.
    static let maxFactor = 0.5

    /// How often the retransmissions' share is measured (nanoseconds).
    static let sharePeriod: Int64 = 500_000_000
    /// The largest share of the pace retransmissions are given room for.
    static let maxRetransmissionShare = 0.5

    /// The media's target is the controller's over (1 + `retransmissionShare`) (1 + `factor`).
    private(set) var factor = 0.0
    /// Retransmitted bytes per media byte sent, lately.
    private(set) var retransmissionShare = 0.0
    private var lastShareSample: (at: Int64, media: Int, retransmitted: Int)?
    /// The mean time between frames (nanoseconds; nil before two were queued).
    private(set) var framePeriod: Int64?
    private var lastQueuedAt: Int64?
    /// The wait a frame may have behind others before the media slows (nanoseconds).
    let allowance: Int64

    /// A control that lets frames wait up to `allowance` (nanoseconds) behind others before it
    /// lowers the media's target.
    init(allowance: Int64) { self.allowance = allowance }

    /// A frame was queued at `time` (its due time, when it has one), with the oldest frame
    /// not yet started `queueDelay` nanoseconds old (`MediaFlow.queueDelay(now:)`).
    mutating func frameQueued(at time: Int64, queueDelay: Int64) {
        defer { lastQueuedAt = time }
        if let last = lastQueuedAt, time > last, time - last < 1_000_000_000 {
            // Frames handed over together (a late wake-up) say nothing of the period.
            framePeriod = framePeriod.map { ($0 * 7 + time - last) / 8 } ?? (time - last)
        }
        guard let period = framePeriod, period > 0 else { return }
        let error = (Double(queueDelay) - max(Double(period) / 4, Double(allowance))) / Double(period)
        factor = min(max(factor + error * Self.gain, 0), Self.maxFactor)
    }

    /// The flow had sent `mediaBytes` of media and `retransmittedBytes` of retransmissions by
    /// `now` (running totals): every `sharePeriod` the retransmissions' share of the period's
    /// media becomes `retransmissionShare` (smoothed, half a period's weight).
    mutating func sent(mediaBytes: Int, retransmittedBytes: Int, at now: Int64) {
        guard let last = lastShareSample else {
            lastShareSample = (now, mediaBytes, retransmittedBytes)
            return
        }
        guard now - last.at >= Self.sharePeriod else { return }
        lastShareSample = (now, mediaBytes, retransmittedBytes)
        let media = mediaBytes - last.media
        let retransmitted = retransmittedBytes - last.retransmitted
        guard media > 0 else { return }
        let share = min(Double(max(retransmitted, 0)) / Double(media), Self.maxRetransmissionShare)
        retransmissionShare += (share - retransmissionShare) / 2
    }

    /// Forgets the queue's history (the flow no longer obeys its controller).
    mutating func reset() { factor = 0 }

    /// The media's target for the controller's `target`, not under `minimum`.
    func mediaTarget(_ target: Int, minimum: Int) -> Int {
        guard factor > 0 || retransmissionShare > 0 else { return target }
        return max(Int(Double(target) / (1 + retransmissionShare) / (1 + factor)), min(minimum, target))
    }
}
