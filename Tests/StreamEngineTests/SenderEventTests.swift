import Glibc
import Testing
import UringIO
@testable import StreamEngine

/// `SenderEventDetector` turns successive snapshots of a flow's counters into events: one per
/// transition, never repeated while the state holds.
struct SenderEventTests {
    private func initial(flow: Int = 2) -> SenderStats {
        var stats = SenderStats()
        stats.flowIndex = flow
        stats.pathMTU = 1500
        stats.destination = "127.0.0.1:5004"
        stats.maxUnconfirmedBytes = 100_000
        return stats
    }

    @Test func nothingChangedSaysNothing() {
        var detector = SenderEventDetector(initial: initial())
        var stats = initial()
        stats.packetsSent = 500  // counters move, no state changes
        #expect(detector.update(stats, now: 1).isEmpty)
        #expect(detector.update(stats, now: 2).isEmpty)
    }

    @Test func receiverGoneAndBackOnceEach() {
        var detector = SenderEventDetector(initial: initial())
        var stats = initial()
        stats.receiverGone = true
        stats.bytesUnconfirmed = 4321
        #expect(detector.update(stats, now: 1) == [.receiverGone(flow: 2, unconfirmedBytes: 4321)])
        #expect(detector.update(stats, now: 2).isEmpty)
        stats.receiverGone = false
        #expect(detector.update(stats, now: 3) == [.receiverBack(flow: 2)])
        #expect(detector.update(stats, now: 4).isEmpty)
    }

    @Test func boundReachedOncePerEpisode() {
        var detector = SenderEventDetector(initial: initial())
        var stats = initial()
        let second: Int64 = 1_000_000_000
        stats.framesDroppedUnconfirmed = 1
        stats.bytesUnconfirmed = 99_000
        #expect(detector.update(stats, now: 0) == [.boundReached(flow: 2, unconfirmedBytes: 99_000, maxUnconfirmedBytes: 100_000)])
        // Drops go on every 100 ms for two seconds: the same episode.
        for step in 1...20 {
            stats.framesDroppedUnconfirmed += 1
            #expect(detector.update(stats, now: Int64(step) * second / 10).isEmpty)
        }
        // Quiet for more than a second, then drops again: a new episode.
        #expect(detector.update(stats, now: 3 * second).isEmpty)
        stats.framesDroppedUnconfirmed += 1
        #expect(detector.update(stats, now: 3 * second + 1).count == 1)
    }

    @Test func pathMTURedirectAbsentFeedbackAndErrors() {
        var detector = SenderEventDetector(initial: initial())
        var stats = initial()
        stats.pathMTU = 1400
        stats.mtuSource = .probe
        stats.redirects = 1
        stats.destination = "127.0.0.2:6000"
        stats.feedbackAbsent = true
        stats.errors = [.send(Errno(rawValue: ECONNREFUSED)): 3, .send(Errno(rawValue: ENETUNREACH)): 1]
        #expect(detector.update(stats, now: 1) == [
            .flowRedirected(flow: 2, destination: "127.0.0.2:6000"),
            .pathMTUChanged(flow: 2, mtu: 1400, source: .probe),
            .feedbackAbsent(flow: 2),
            .sendsFailing(flow: 2, failure: .send(Errno(rawValue: ECONNREFUSED)), datagrams: 3),
            .sendsFailing(flow: 2, failure: .send(Errno(rawValue: ENETUNREACH)), datagrams: 1),
        ])
        stats.errors[.send(Errno(rawValue: ECONNREFUSED))] = 10  // the same kind again: counted, not said again
        #expect(detector.update(stats, now: 2).isEmpty)
    }
}
