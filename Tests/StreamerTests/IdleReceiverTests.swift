import Foundation
import Testing

/// A receiver waiting for its stream sleeps (Sources/StreamEngine/Media/MediaReceiver.swift,
/// `ReceiveLoopHandler.nextWait`; results/profile.md section 36): while nothing is due it waits up
/// to 250 ms, where it woke every 10 ms, and a stop request wakes it. Counted by the loop's own
/// `io_uring_enter` calls, one per wait, in `recv`'s stats.
@Suite struct IdleReceiverTests {
    @Test(.enabled(if: streamerBinary() != nil, "the streamer executable is not built"), arguments: [["--no-feedback"], []])
    func aReceiverWaitingForItsStreamSleeps(_ feedback: [String]) throws {
        let binary = try #require(streamerBinary())
        let directory = try temporaryDirectory("idle-recv")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stats = directory.appendingPathComponent("stats.json").path
        let port = nextPortPair()
        let outcome = try run(binary, ["recv", "--listen", "127.0.0.1:\(port)", "--duration", "1", "--quiet", "--stats", stats]
                                  + feedback)
        #expect(outcome.status == 0, "\(outcome.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: stats))) as? [String: Any])
        #expect((object["packets"] as? [String: Any])?["received"] as? Int == 0)
        let enters = try #require(object["ioUringEnters"] as? Int, "\(object)")
        // One second of waits of at most 250 ms, and the one the stop request ends: about 5,
        // however slow the machine (a wait ends at its time or at a wake-up, never sooner);
        // with a wait of 10 ms, about 100.
        #expect(enters >= 2 && enters <= 12, "\(enters) io_uring_enter calls in 1 s idle")
    }
}
