import Synchronization
import Testing
@testable import streamer

/// A value behind a lock, shared with the watch's closures.
private final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func get() -> Value { mutex.withLock { $0 } }
    func update(_ change: (inout Value) -> Void) { mutex.withLock { change(&$0) } }
}

/// A clock the test sets by hand, and the lines a watch said.
private final class StallWatchHarness: Sendable {
    private let time = Locked<Int64>(0)
    private let said = Locked<[String]>([])
    let watch: SourceStallWatch

    init() {
        let time = self.time
        let said = self.said
        watch = SourceStallWatch(clock: { time.get() }, say: { line in said.update { $0.append(line) } })
    }

    /// Sets the clock to `milliseconds`.
    func at(_ milliseconds: Int64) { time.update { $0 = milliseconds * 1_000_000 } }
    /// A frame delivered at `milliseconds` (the clock moves there too).
    func frame(at milliseconds: Int64) {
        at(milliseconds)
        watch.frameDelivered(now: milliseconds * 1_000_000)
    }
    var lines: [String] { said.get() }
    var stats: [String: Any] { watch.statsObject() }
}

/// The source stall watch (Sources/streamer/SourceStallWatch.swift) through its API, on a
/// synthetic clock: `look()` is one look of its watch thread, which the tests do not start.
@Suite struct SourceStallWatchTests {
    @Test func thresholdIsTenFrameIntervalsAndAtLeastHalfASecond() {
        #expect(SourceStallWatch.threshold(fps: 30) == 500_000_000)
        #expect(SourceStallWatch.threshold(fps: 10) == 1_000_000_000)
        #expect(SourceStallWatch.threshold(fps: 0) == 10_000_000_000)
    }

    /// Silence past the threshold is one stall, said once when it starts and once when frames
    /// come again; its length runs from the last frame before it to the first after it.
    @Test func aStallIsSaidOnceWhenItStartsAndOnceWhenItEnds() {
        let harness = StallWatchHarness()
        harness.watch.setFrameRate(30)
        for index in 0...30 { harness.frame(at: Int64(index) * 33) }  // 990 ms of frames, no stall
        harness.at(1400)
        #expect(harness.watch.look())
        #expect(harness.lines.isEmpty, "410 ms of silence is below the 500 ms threshold")
        harness.at(1600)
        #expect(harness.watch.look())
        harness.at(2500)
        #expect(harness.watch.look())
        #expect(harness.lines == ["streamer send: source stalled (no frame for 0.6 s)"])
        #expect(harness.stats["stalled"] as? Bool == true)
        #expect(harness.stats["stalledMs"] as? Int == 1510, "a stall under way counts up to now")
        harness.frame(at: 3090)
        #expect(harness.lines.last == "streamer send: source resumed after 2.1 s")
        #expect(harness.lines.count == 2)
        #expect(harness.stats["stalls"] as? Int == 1)
        #expect(harness.stats["stalledMs"] as? Int == 2100)
        #expect(harness.stats["stalled"] as? Bool == false)
        #expect(harness.stats["thresholdMs"] as? Int == 500)
    }

    /// A gap just over the threshold that the watch thread did not look at in time is still a
    /// stall when the next frame comes: counted, and both lines said then.
    @Test func aStallTheWatchDidNotSeeIsCountedAtTheNextFrame() {
        let harness = StallWatchHarness()
        harness.frame(at: 0)
        harness.frame(at: 700)
        #expect(harness.lines == ["streamer send: source stalled (no frame for 0.7 s)",
                                  "streamer send: source resumed after 0.7 s"])
        #expect(harness.stats["stalls"] as? Int == 1)
        #expect(harness.stats["stalledMs"] as? Int == 700)
    }

    /// Nothing before the first frame is a stall (opening the encoder, waiting for y4m), and
    /// the frame rate a y4m header sets moves the threshold.
    @Test func theWatchStartsAtTheFirstFrameAndFollowsTheFrameRate() {
        let harness = StallWatchHarness()
        harness.at(5000)
        #expect(harness.watch.look())
        #expect(harness.lines.isEmpty)
        harness.frame(at: 5000)
        harness.watch.setFrameRate(5)  // 10 intervals: 2 s
        harness.at(6900)
        harness.watch.look()
        #expect(harness.lines.isEmpty)
        #expect(harness.stats["thresholdMs"] as? Int == 2000)
        harness.at(7100)
        harness.watch.look()
        #expect(harness.lines.count == 1)
    }

    /// A source that ends during a stall: the stall ends there (counted up to the end, said
    /// once), and the watch thread's next look stops it.
    @Test func aSourceThatEndsWhileStalled() {
        let harness = StallWatchHarness()
        harness.frame(at: 0)
        harness.at(800)
        harness.watch.look()
        harness.at(1200)
        harness.watch.sourceEnded()
        #expect(harness.lines == ["streamer send: source stalled (no frame for 0.8 s)",
                                  "streamer send: source ended while stalled (no frame for 1.2 s)"])
        #expect(harness.stats["stalledMs"] as? Int == 1200)
        #expect(harness.stats["stalled"] as? Bool == false)
        #expect(!harness.watch.look(), "the watch thread stops after the source ended")
        #expect(harness.lines.count == 2)
    }
}
