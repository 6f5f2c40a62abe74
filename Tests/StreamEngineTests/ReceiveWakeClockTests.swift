import Testing
@testable import StreamEngine

/// `ReceiveWakeClock` (Sources/StreamEngine/Media/ReceiveWakeClock.swift) on a synthetic clock:
/// the test counts the clock reads and chooses every time.
@Suite struct ReceiveWakeClockTests {
    static let millisecond: Int64 = 1_000_000
    static let start: Int64 = 1_700_000_000_000_000_000

    @Test func theClockIsReadOncePerWakeUpForAllItsDatagrams() {
        var wake = ReceiveWakeClock()
        var reads = 0
        var time = Self.start
        func read() -> Int64 { reads += 1; return time }
        #expect(wake.datagramTime(clock: read) == Self.start)
        time += 3 * Self.millisecond
        // The same wake-up's other datagrams: the first one's time, no read.
        #expect(wake.datagramTime(clock: read) == Self.start)
        #expect(wake.datagramTime(clock: read) == Self.start)
        #expect(reads == 1)
        wake.wokeUp()
        #expect(wake.datagramTime(clock: read) == Self.start + 3 * Self.millisecond)
        #expect(reads == 2)
    }

    @Test func theIntervalBetweenDatagramWakeUpsIsSmoothedByAnEighth() {
        var wake = ReceiveWakeClock()
        func wakeUp(at time: Int64) {
            wake.wokeUp()
            _ = wake.datagramTime { time }
        }
        wakeUp(at: Self.start)
        #expect(wake.datagramInterval == .max)  // one wake-up: no interval yet
        wakeUp(at: Self.start + 4 * Self.millisecond)
        #expect(wake.datagramInterval == 4 * Self.millisecond)
        wakeUp(at: Self.start + 16 * Self.millisecond)  // a gap of 12 ms: 4 + (12 - 4) / 8
        #expect(wake.datagramInterval == 5 * Self.millisecond)
        // A wake-up without datagrams changes nothing.
        wake.wokeUp()
        #expect(wake.datagramInterval == 5 * Self.millisecond && wake.lastDatagramWake == Self.start + 16 * Self.millisecond)
        // After a pause longer than a second the interval is not known again.
        wakeUp(at: Self.start + 16 * Self.millisecond + ReceiveWakeClock.pause + 1)
        #expect(wake.datagramInterval == .max)
    }

    /// At 240 fps a deadline may be served up to 5 ms late; once the datagrams stop (the time
    /// since the last one longer than the slack), on time.
    @Test func theSlackFollowsTheDatagramsRate() {
        var wake = ReceiveWakeClock()
        var time = Self.start
        for _ in 0..<10 {
            wake.wokeUp()
            _ = wake.datagramTime { time }
            time += 4_166_667
        }
        let last = wake.lastDatagramWake
        #expect(wake.deadlineSlack(limit: MediaReceiver.slackLimit(reportInterval: .milliseconds(20)), now: last + Self.millisecond) == 5 * Self.millisecond)
        #expect(wake.deadlineSlack(limit: MediaReceiver.slackLimit(reportInterval: .milliseconds(8)), now: last + Self.millisecond) == 0)
        #expect(wake.deadlineSlack(limit: MediaReceiver.slackLimit(reportInterval: .milliseconds(20)), now: last + 6 * Self.millisecond) == 0)
        #expect(ReceiveWakeClock().deadlineSlack(limit: MediaReceiver.slackLimit(reportInterval: .milliseconds(20)), now: Self.start) == 0)
    }
}
