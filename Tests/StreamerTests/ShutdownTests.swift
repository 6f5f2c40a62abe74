import Foundation
import Glibc
import Testing
import TestSupport

/// SIGINT/SIGTERM: final stats written, exit 0; a second signal exits at once.
@Suite(.enabled(if: uringEnabled, "io_uring is disabled here"))
struct ShutdownTests {
    @Test func signalsEndRunsCleanlyWithFinalStats() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("signals")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = nextPortPair()
        let receiver = try launch(binary, ["recv", "--listen", "127.0.0.1:\(port)", "--quiet",
                                           "--stats", directory.appendingPathComponent("recv.json").path])
        try waitUntilBound(port: port)
        let sender = try launch(binary, ["send", "--to", "127.0.0.1:\(port)", "--size", "320x240", "--quiet",
                                         "--stats", directory.appendingPathComponent("send.json").path])
        Thread.sleep(forTimeInterval: 2)
        kill(sender.processIdentifier, SIGINT)
        #expect(waitForExit(sender, seconds: 10) == 0)
        Thread.sleep(forTimeInterval: 0.3)
        kill(receiver.processIdentifier, SIGTERM)
        #expect(waitForExit(receiver, seconds: 10) == 0)
        let send = try readJSON(directory.appendingPathComponent("send.json"))
        let recv = try readJSON(directory.appendingPathComponent("recv.json"))
        let sent = try #require(intField(send, "frames.sent"))
        #expect(sent > 30)
        #expect(intField(recv, "frames.complete") == sent)
        #expect(intField(recv, "packets.received") == intField(send, "packets.sent"))
    }

    /// A shutdown that cannot finish (its output pipe is full and nobody reads it) ends at
    /// once on the second signal.
    @Test func secondSignalExitsAtOnce() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let port = nextPortPair()
        let unread = Pipe()  // never read: the receiver's writes block once 64 KB are in it
        let receiver = try launch(binary, ["recv", "--listen", "127.0.0.1:\(port)", "--quiet", "--out", "-"], stdout: unread)
        try waitUntilBound(port: port)
        let sender = try launch(binary, ["send", "--to", "127.0.0.1:\(port)", "--size", "320x240", "--duration", "4", "--quiet"])
        Thread.sleep(forTimeInterval: 2.5)
        kill(receiver.processIdentifier, SIGINT)
        Thread.sleep(forTimeInterval: 0.5)
        #expect(receiver.isRunning, "the receiver should still be blocked in its write")
        kill(receiver.processIdentifier, SIGINT)
        #expect(waitForExit(receiver, seconds: 2) == 130)
        _ = waitForExit(sender, seconds: 10)
        withExtendedLifetime(unread) {}
    }
}
