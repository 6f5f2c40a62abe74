import Glibc
@testable import StreamEngine
import Testing
import UringIO
@testable import streamer

/// `streamer send`'s closing lines on stderr (`sendSummaryLines`): what was sent, the frames
/// not sent and why, the sends that failed; in words, with the counts the stats JSON keeps.
struct SendSummaryTests {
    func stats() -> SenderStats {
        var stats = SenderStats()
        stats.destination = "127.0.0.1:5004"
        stats.framesSent = 416
        stats.packetsSent = 6_661
        stats.bytesSent = 8_981_477
        stats.datagramSize = 1_470
        stats.pathMTU = 1_500
        stats.mtuSource = .kernel
        stats.pacingRate = 6_000_000
        return stats
    }

    @Test func aCleanRunIsOneLine() {
        #expect(sendSummaryLines(stats()) == [
            "streamer send: 416 frames, 6661 packets, 8981477 bytes to 127.0.0.1:5004, largest datagram 1470 B (MTU 1500, kernel)"])
    }

    @Test func framesDroppedForAFullQueueAreNamedWithThePace() {
        var dropped = stats()
        dropped.framesDroppedQueueFull = 1_024
        dropped.framesDroppedUnconfirmed = 3
        dropped.framesDroppedUnviable = 2
        let lines = sendSummaryLines(dropped)
        #expect(lines.count == 2)
        #expect(lines.last == "streamer send: 1029 frames to 127.0.0.1:5004 not sent: 1024 for a full queue (the stream came "
            + "faster than the pace, 6Mbit/s: raise --pace), 3 over the unconfirmed bound, 2 while no route was viable")
    }

    @Test func framesDroppedUnderCongestionControlNameThePathNotThePace() {
        var dropped = stats()
        dropped.framesDroppedQueueFull = 4
        dropped.congestion = CongestionStats()
        dropped.congestion?.framesDropped = 7
        #expect(sendSummaryLines(dropped).last == "streamer send: 11 frames to 127.0.0.1:5004 not sent: 4 for a full queue "
            + "(the stream came faster than the path took it), 7 by congestion control (waited too long for the path)")
    }

    @Test func failedSendsAreNamedByTheirErrors() {
        var failed = stats()
        failed.packetsFailed = 3
        failed.errors = [.send(Errno(rawValue: ECONNREFUSED)): 2, .send(Errno(rawValue: ENETUNREACH)): 1]
        #expect(sendSummaryLines(failed).last
            == "streamer send: 3 packets to 127.0.0.1:5004 failed to send: Connection refused (2), Network is unreachable (1)")
    }
}
