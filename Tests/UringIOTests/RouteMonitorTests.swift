import Glibc
import Testing
@testable import UringIO

/// The route monitor's listening and its lookups, driven by synthetic completions and times:
/// it never stops listening silently, and every notice or lost notice is followed by lookups.
@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct RouteMonitorTests {
    private let start: Int64 = 1_000_000_000
    private let millisecond: Int64 = 1_000_000

    private func completion(_ result: Int32) -> Completion {
        Completion(tag: CompletionTag(kind: CompletionTag.routeKind, payload: 0), result: result, flags: 0)
    }

    /// The lookups `poll` asks for at each of `offsets` (milliseconds after `start`).
    private func lookups(_ monitor: RouteMonitor, at offsets: [Int64]) -> [Int64] {
        offsets.filter { monitor.poll(now: start + $0 * millisecond) }
    }

    /// A route notice asks for a lookup at once and again 20 and 200 ms later (IPv4 announces a
    /// removed route before it is out of the table); other messages ask for nothing.
    @Test func noticeIsFollowedBySettleLookups() throws {
        let ring = try Ring(entries: 64)
        let monitor = try RouteMonitor(ring: ring)
        try monitor.arm()
        #expect(!monitor.handle(completion(0), now: start))
        #expect(monitor.armed && monitor.notifications == 0)
        #expect(!monitor.take(NetlinkMessage(type: NetlinkMessage.done, payload: []).bytes, now: start))
        #expect(lookups(monitor, at: [0, 100, 1_000]).isEmpty)
        #expect(monitor.nextPollDue == nil)

        let removed = NetlinkMessage(type: RouteMessageType.deleteRoute, payload: []).bytes
        #expect(monitor.take(removed + removed, now: start))
        #expect(monitor.notifications == 2)
        // An owner that sleeps while idle learns when to wake for each settle lookup.
        #expect(monitor.nextPollDue == start + 20 * millisecond)
        #expect(lookups(monitor, at: [0, 19, 20]) == [20])
        #expect(monitor.nextPollDue == start + 200 * millisecond)
        #expect(lookups(monitor, at: [21, 150, 200, 201, 5_000]) == [200])
        #expect(monitor.nextPollDue == nil)
        #expect(monitor.failures == 0 && monitor.overruns == 0 && monitor.armed)
    }

    /// An overrun (notices lost) is counted, asks for lookups (at once and settled), and the
    /// monitor listens on; an interrupted receive is queued again and asks for nothing.
    @Test func overrunLooksUpAgainAndListens() throws {
        let ring = try Ring(entries: 64)
        let monitor = try RouteMonitor(ring: ring)
        try monitor.arm()
        #expect(monitor.handle(completion(-ENOBUFS), now: start))
        #expect(monitor.overruns == 1 && monitor.armed && monitor.failures == 0)
        #expect(lookups(monitor, at: [0, 20, 200]) == [20, 200])
        #expect(!monitor.handle(completion(-EINTR), now: start))
        #expect(monitor.armed && monitor.failures == 0)
        #expect(lookups(monitor, at: [1_000]).isEmpty)
    }

    /// A receive that fails is counted and not queued again at once (no spin on a failing
    /// socket); a second later `poll` queues it and asks for lookups, since notices may have
    /// been missed meanwhile.
    @Test func failedReceiveIsRetriedNotSpun() throws {
        let ring = try Ring(entries: 64)
        let monitor = try RouteMonitor(ring: ring)
        try monitor.arm()
        #expect(!monitor.handle(completion(-EINVAL), now: start))
        #expect(monitor.failures == 1 && monitor.failure == Errno(EINVAL) && !monitor.armed)
        #expect(lookups(monitor, at: [0, 1, 999]).isEmpty)
        #expect(!monitor.armed)
        #expect(monitor.nextPollDue == start + RouteMonitor.retryDelay)
        let retry = RouteMonitor.retryDelay / millisecond
        #expect(lookups(monitor, at: [retry]) == [retry])
        #expect(monitor.armed)
        #expect(lookups(monitor, at: [retry + 20, retry + 100, retry + 200]) == [retry + 20, retry + 200])
        #expect(monitor.failures == 1)
    }
}
