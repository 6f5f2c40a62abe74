import Foundation
import Synchronization
import UringIO

/// Notices a source that stops delivering access units (an encoder that blocks, a stdin pipe
/// that stops sending), counts each stall and its length, and says so once on stderr when it
/// starts and once when it ends — never a line per frame.
///
/// The source thread reports each frame it delivers; a watch thread of its own looks every
/// 100 ms, so a stall is noticed while the source thread is still blocked (in `read` or inside
/// x265). A stall is a gap between two frames longer than ``threshold(fps:)``; its length
/// runs from the last frame before it to the first one after. The watch starts at the first
/// frame (opening the encoder or waiting for the first y4m bytes is not a stall) and ends with
/// the source.
final class SourceStallWatch: Sendable {
    private struct State {
        var fps = 30
        /// Monotonic time of the last frame delivered; nil before the first.
        var lastFrame: Int64?
        var ended = false
        /// A stall is under way (said on stderr, counted in `stalls`).
        var stalled = false
        var stalls = 0
        /// Completed stalls' total length.
        var stalledNanoseconds: Int64 = 0
    }

    private let state = Mutex(State())
    private static let pollMicroseconds: useconds_t = 100_000
    /// Monotonic nanoseconds (a synthetic clock in tests).
    private let clock: @Sendable () -> Int64
    /// Where the lines about stalls go (stderr; collected in tests).
    private let say: @Sendable (String) -> Void

    /// A watch that reads `clock` and says what it notices through `say`.
    init(clock: @escaping @Sendable () -> Int64 = monotonicNanoseconds,
         say: @escaping @Sendable (String) -> Void = printError) {
        self.clock = clock
        self.say = say
    }

    /// How long without a frame counts as a stall: 10 frame intervals, at least 500 ms.
    static func threshold(fps: Int) -> Int64 { max(10 * 1_000_000_000 / Int64(max(fps, 1)), 500_000_000) }

    /// Starts the watch thread, which runs until ``sourceEnded()``.
    func start(fps: Int) {
        setFrameRate(fps)
        Thread { [self] in
            while true {
                usleep(Self.pollMicroseconds)
                if !look() { return }
            }
        }.start()
    }

    /// One look of the watch thread, at the clock's time: a source silent for longer than
    /// the threshold is stalled (said once). Returns false once the source has ended.
    @discardableResult
    func look() -> Bool {
        let now = clock()
        let (ended, silence) = state.withLock { state -> (Bool, Int64?) in
            guard !state.ended, !state.stalled, let last = state.lastFrame,
                  now - last > Self.threshold(fps: state.fps) else { return (state.ended, nil) }
            state.stalled = true
            state.stalls += 1
            return (false, now - last)
        }
        if let silence { say("streamer send: source stalled (no frame for \(Self.seconds(silence)))") }
        return !ended
    }

    /// The source's frame rate (a y4m header may set it after the start).
    func setFrameRate(_ fps: Int) { state.withLock { $0.fps = fps } }

    /// The source delivered a frame at `now` (monotonic nanoseconds): ends a stall, if any.
    func frameDelivered(now: Int64) {
        let (gap, noticed) = state.withLock { state -> (Int64?, Bool) in
            defer { state.lastFrame = now }
            guard let last = state.lastFrame, now - last > Self.threshold(fps: state.fps) else { return (nil, false) }
            // The watch may not have looked yet during a gap just over the threshold: still a stall.
            let noticed = state.stalled
            if !noticed { state.stalls += 1 }
            state.stalled = false
            state.stalledNanoseconds += now - last
            return (now - last, noticed)
        }
        guard let gap else { return }
        if !noticed { say("streamer send: source stalled (no frame for \(Self.seconds(gap)))") }
        say("streamer send: source resumed after \(Self.seconds(gap))")
    }

    /// The source thread is done: the watch stops, and a stall under way ends here (counted
    /// up to now, and said).
    func sourceEnded() {
        let now = clock()
        let gap = state.withLock { state -> Int64? in
            state.ended = true
            guard state.stalled, let last = state.lastFrame else { return nil }
            state.stalled = false
            state.stalledNanoseconds += now - last
            return now - last
        }
        if let gap { say("streamer send: source ended while stalled (no frame for \(Self.seconds(gap)))") }
    }

    /// The `source` object of the sender's stats JSON: `stalls`, `stalledMs` (including a
    /// stall under way), `stalled`, `thresholdMs`.
    func statsObject() -> [String: Any] {
        let now = clock()
        return state.withLock { state in
            let ongoing = state.stalled ? now - (state.lastFrame ?? now) : 0
            return ["stalls": state.stalls,
                    "stalledMs": Int((state.stalledNanoseconds + ongoing) / 1_000_000),
                    "stalled": state.stalled,
                    "thresholdMs": Int(Self.threshold(fps: state.fps) / 1_000_000)]
        }
    }

    private static func seconds(_ nanoseconds: Int64) -> String {
        String(format: "%.1f s", Double(nanoseconds) / 1e9)
    }
}
