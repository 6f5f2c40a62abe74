/// The derived playout latency frames are released with: it follows its target (3 x RTT +
/// jitter, `LossRecovery.targetLatency`) by at most a tenth of the time that passes, 100 ms
/// per second, as WebRTC's receiver moves its current delay toward its target (libwebrtc
/// `VCMTiming`, `kDelayMaxChangeMsPerS`). While it grows, frames go out at 9/10 of the pace
/// they came (a 33 ms frame interval becomes 37 ms); while it shrinks, at 11/10.
///
/// A latency that took its target at once froze the picture for the whole step: when the first
/// answers on a path with a 300 ms queue measured its RTT, the latency went from 150 ms to
/// ~1.1 s, and the next frame waited that much longer than the one before it (tools/cc-eval
/// case e: frames put out froze 1.0-1.1 s in 3 of 3 runs, 0.2-0.4 s with the climb;
/// results/cc/competition.md). Its price: a gap's deadline is the latency in use, so losses
/// during the climb are repaired only once the latency has grown past their round trip.
///
/// Pure: times are passed in (nanoseconds, the clock of kernel receive timestamps).
struct PlayoutLatency: Sendable {
    /// The latency moves by at most 1/`pace` of the time that passes.
    static let pace: Int64 = 10

    /// The latency in use when it was last moved (at `moved`); nil before the first move.
    private(set) var current: Int64?
    private var moved: Int64 = 0

    /// Moves the latency in use toward `target` by what the time since the last move allows
    /// (the first move takes the target); returns it.
    @discardableResult
    mutating func follow(_ target: Int64, now: Int64) -> Int64 {
        guard let value = current else {
            (current, moved) = (target, now)
            return target
        }
        guard now > moved else { return value }
        let step = (now - moved) / Self.pace
        moved = now
        let next = value < target ? min(target, value + step) : max(target, value - step)
        current = next
        return next
    }

    /// When a frame whose first packet arrived at `firstArrival` is due: the first time t when
    /// t − firstArrival reaches the latency in use at t, the latency moving from `current` (at
    /// the last move) toward `target` as `follow` would move it. Rounded up, so that the frame
    /// is due when `follow` is called then.
    func releaseTime(firstArrival: Int64, target: Int64) -> Int64 {
        let value = current ?? target
        let due = firstArrival + value
        guard value != target, due > moved else { return due }
        // The latency moves by (t − moved) / pace: t − moved = (due − moved) / (1 ± 1 / pace),
        // until it reaches the target; then t = firstArrival + target.
        let ahead = due - moved
        if value < target {
            return min(firstArrival + target, moved + (ahead * Self.pace + Self.pace - 2) / (Self.pace - 1))
        }
        return max(firstArrival + target, moved + (ahead * Self.pace + Self.pace) / (Self.pace + 1))
    }
}
