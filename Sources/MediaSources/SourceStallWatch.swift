import Dispatch
import Synchronization
import UringIO

/// What a ``SourceStallWatch`` tells its observer: once when a stall starts, once when it
/// ends. Never one per frame.
public enum SourceStallEvent: Sendable, Equatable {
    /// No frame for `silence`, longer than the threshold: the source stalled.
    case stalled(silence: Duration)
    /// Frames come again; the stall lasted `gap` (from the last frame before it to this one).
    case resumed(after: Duration)
    /// The source ended during a stall that had lasted `silence`.
    case endedWhileStalled(silence: Duration)
}

/// A source's stall counters (the `source` object of `streamer send`'s stats JSON).
public struct SourceStallStats: Sendable, Equatable {
    /// Stalls so far, including one under way.
    public var stalls: Int
    /// Time spent stalled, including a stall under way up to now.
    public var stalledTime: Duration
    /// A stall is under way.
    public var isStalled: Bool
    /// How long without a frame counts as a stall at the source's frame rate.
    public var threshold: Duration

    /// Makes the counters from their values.
    public init(stalls: Int, stalledTime: Duration, isStalled: Bool, threshold: Duration) {
        self.stalls = stalls
        self.stalledTime = stalledTime
        self.isStalled = isStalled
        self.threshold = threshold
    }
}

/// Notices a source that stops delivering access units (an encoder that blocks, a stdin pipe
/// that stops sending), counts each stall and its length, and tells its observer once when
/// it starts and once when it ends (``SourceStallEvent``).
///
/// The source thread reports each frame it delivers; a watch thread of its own looks when the
/// threshold has passed since the last frame it knows of, so a stall is noticed while the
/// source thread is still blocked (in `read` or inside x265), and a source that delivers
/// wakes the watch about once per threshold, not at a fixed poll: on this project's VMs every
/// wake-up of an idle thread costs 20 – 47 µs of CPU (results/profile.md section 43). Before
/// the first frame and during a stall (when only a frame can end it) it looks every 100 ms.
/// A stall is a gap between two frames longer than ``threshold(frameRate:)``; its
/// length runs from the last frame before it to the first one after. The watch starts at the
/// first frame (opening the encoder or waiting for the first y4m bytes is not a stall) and
/// ends with the source. ``LiveSource`` runs one for each source.
public final class SourceStallWatch: Sendable {
    private struct State {
        var fps = 30
        /// Time of the last frame delivered; nil before the first.
        var lastFrame: ContinuousClock.Instant?
        var ended = false
        /// A stall is under way (told to the observer, counted in `stalls`).
        var stalled = false
        var stalls = 0
        /// Completed stalls' total length.
        var stalledTime = Duration.zero
    }

    private let state = Mutex(State())
    private let onEvent: @Sendable (SourceStallEvent) -> Void
    /// How often the watch looks while there is no frame to count from (before the first one,
    /// during a stall).
    private static let idlePoll = Duration.milliseconds(100)
    /// Signalled when the source ends: the watch thread stops at once, not at its next look.
    private let ended = DispatchSemaphore(value: 0)

    /// Makes a watch that tells `onEvent` (on the source's thread or the watch's) when the
    /// source stalls, resumes, or ends while stalled.
    init(onEvent: @escaping @Sendable (SourceStallEvent) -> Void) {
        self.onEvent = onEvent
    }

    /// How long without a frame counts as a stall: 10 frame intervals, at least 500 ms.
    public static func threshold(frameRate: Int) -> Duration {
        max(.nanoseconds(10 * 1_000_000_000 / Int64(max(frameRate, 1))), .milliseconds(500))
    }

    /// The counters now (a stall under way counts up to now).
    public var stats: SourceStallStats { stats(now: .now) }

    func stats(now: ContinuousClock.Instant) -> SourceStallStats {
        state.withLock { state in
            let ongoing = state.stalled ? now - (state.lastFrame ?? now) : .zero
            return SourceStallStats(stalls: state.stalls, stalledTime: state.stalledTime + ongoing,
                                    isStalled: state.stalled, threshold: Self.threshold(frameRate: state.fps))
        }
    }

    /// Starts the watch thread, which runs until ``sourceEnded()``.
    func start(frameRate: Int) {
        setFrameRate(frameRate)
        startDetachedThread { [self] in
            while true {
                let now = ContinuousClock.now
                guard let (silence, next) = look(now: now) else { return }
                if let silence { onEvent(.stalled(silence: silence)) }
                // A millisecond past the moment the gap would exceed the threshold.
                let wait = next.map { max($0 - now, .zero) + .milliseconds(1) } ?? Self.idlePoll
                if ended.wait(timeout: .now() + .nanoseconds(Int(wait.nanoseconds))) == .success { return }
            }
        }
    }

    /// One look of the watch thread at `now`: nil once the source has ended; else the silence of
    /// a stall that starts now (nil: none) and when the current gap would exceed the threshold
    /// (nil: no gap to time, before the first frame or during a stall).
    func look(now: ContinuousClock.Instant) -> (silence: Duration?, next: ContinuousClock.Instant?)? {
        state.withLock { state in
            guard !state.ended else { return nil }
            guard !state.stalled, let last = state.lastFrame else { return (nil, nil) }
            let threshold = Self.threshold(frameRate: state.fps)
            guard now - last > threshold else { return (nil, last + threshold) }
            state.stalled = true
            state.stalls += 1
            return (now - last, nil)
        }
    }

    /// The source's frame rate (a y4m header may set it after the start).
    func setFrameRate(_ frameRate: Int) { state.withLock { $0.fps = frameRate } }

    /// The source delivered a frame at `now`: ends a stall, if any.
    func frameDelivered(at now: ContinuousClock.Instant) {
        let (gap, noticed) = state.withLock { state -> (Duration?, Bool) in
            defer { state.lastFrame = now }
            guard let last = state.lastFrame, now - last > Self.threshold(frameRate: state.fps) else { return (nil, false) }
            // The watch may not have looked yet during a gap just over the threshold: still a stall.
            let noticed = state.stalled
            if !noticed { state.stalls += 1 }
            state.stalled = false
            state.stalledTime += now - last
            return (now - last, noticed)
        }
        guard let gap else { return }
        if !noticed { onEvent(.stalled(silence: gap)) }
        onEvent(.resumed(after: gap))
    }

    /// The source thread is done: the watch stops, and a stall under way ends here (counted
    /// up to now, and told).
    func sourceEnded(at now: ContinuousClock.Instant = .now) {
        let gap = state.withLock { state -> Duration? in
            if !state.ended { ended.signal() }
            state.ended = true
            guard state.stalled, let last = state.lastFrame else { return nil }
            state.stalled = false
            state.stalledTime += now - last
            return now - last
        }
        if let gap { onEvent(.endedWhileStalled(silence: gap)) }
    }
}
