import Synchronization
import Testing
@testable import streamer

/// What a stop signal means (Sources/streamer/StopSignal.swift), on a synthetic clock, and the
/// final report written once whoever asks first.
@Suite struct StopRequestTests {
    static let millisecond: Int64 = 1_000_000

    /// The first is a stop; copies within the window are the same request; a signal after it
    /// (a user's second Ctrl-C, 300 ms later) exits at once.
    @Test func copiesWithinTheWindowAreOneRequest() {
        let requests = StopRequests(window: 150 * Self.millisecond)
        let start: Int64 = 7_000 * Self.millisecond
        #expect(requests.signalHandled(now: start) == .stop)
        #expect(requests.signalHandled(now: start) == .duplicate)
        #expect(requests.signalHandled(now: start + 20_000) == .duplicate)  // timeout's copy, 20 us later
        #expect(requests.signalHandled(now: start + 149 * Self.millisecond) == .duplicate)
        #expect(requests.signalHandled(now: start + 300 * Self.millisecond) == .exitNow)
        #expect(requests.signalHandled(now: start + 301 * Self.millisecond) == .exitNow)
    }

    @Test func theDefaultWindowSitsBetweenCopiesAndASecondPress() {
        #expect(StopRequests.defaultWindow >= 100 * Self.millisecond)
        #expect(StopRequests.defaultWindow <= 200 * Self.millisecond)
        let requests = StopRequests()
        #expect(requests.signalHandled(now: 0) == .stop)
        #expect(requests.signalHandled(now: 300 * Self.millisecond) == .exitNow)
    }

    /// The report runs once: the command's own write and the trap's write before exit do not
    /// both print a summary.
    @Test func theFinalReportIsWrittenOnce() throws {
        let writes = Atomic<Int>(0)
        let report = FinalReport { writes.add(1, ordering: .relaxed) }
        try report.write()
        report.writeBeforeExit()
        try report.write()
        #expect(writes.load(ordering: .relaxed) == 1)

        let other = FinalReport { writes.add(1, ordering: .relaxed) }
        other.writeBeforeExit()
        try other.write()
        #expect(writes.load(ordering: .relaxed) == 2)
    }
}
