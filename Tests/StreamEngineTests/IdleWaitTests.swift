@testable import StreamEngine
import Testing

/// The engine's idle wait (`MediaSender.idleWait`): how long the ring sleeps when nothing is
/// queued or due, given the poll and the timers that must not wait for it.
struct IdleWaitTests {
    let poll: Int64 = 50_000_000
    let now: Int64 = 7_000_000_000

    /// No timer: the poll.
    @Test func withoutTimersTheWaitIsThePoll() {
        #expect(MediaSender.idleWait(poll: poll, timersDue: nil, routeLookupDue: nil, now: now) == poll)
    }

    /// A congestion controller's timer before the poll ends the wait when it falls due (a tail
    /// probe a probe timeout after the last report, not at the next frame or poll); one after
    /// the poll leaves the poll.
    @Test func aControllersTimerEndsTheWaitWhenDue() {
        #expect(MediaSender.idleWait(poll: poll, timersDue: now + 31_250_000, routeLookupDue: nil, now: now) == 31_250_000)
        #expect(MediaSender.idleWait(poll: poll, timersDue: now + 80_000_000, routeLookupDue: nil, now: now) == poll)
    }

    /// The route monitor's settle lookup likewise, and of the two timers the earlier wins.
    @Test func theEarliestTimerWins() {
        #expect(MediaSender.idleWait(poll: poll, timersDue: nil, routeLookupDue: now + 20_000_000, now: now) == 20_000_000)
        #expect(MediaSender.idleWait(poll: poll, timersDue: now + 12_000_000, routeLookupDue: now + 20_000_000, now: now) == 12_000_000)
        #expect(MediaSender.idleWait(poll: poll, timersDue: now + 30_000_000, routeLookupDue: now + 20_000_000, now: now) == 20_000_000)
    }

    /// A timer already due or past waits 1 ms, not zero or a negative time: its flow ticks
    /// before the wait, and a timer it did not clear must not spin the loop.
    @Test func aTimerDueNowWaitsAMillisecond() {
        #expect(MediaSender.idleWait(poll: poll, timersDue: now, routeLookupDue: nil, now: now) == 1_000_000)
        #expect(MediaSender.idleWait(poll: poll, timersDue: now - 5_000_000, routeLookupDue: now + 20_000_000, now: now) == 1_000_000)
        #expect(MediaSender.idleWait(poll: poll, timersDue: now + 400_000, routeLookupDue: nil, now: now) == 1_000_000)
    }
}
