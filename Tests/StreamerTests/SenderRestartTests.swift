import Foundation
import Glibc
import Testing
import TestSupport

/// `streamer recv` left running while its sender is stopped and started again: it follows each
/// new sender (a new SSRC, sequence and clock from a new port) once the one before said BYE, or
/// fell silent for 2 s, and its counts add up over all of them.
@Suite(.enabled(if: uringEnabled, "io_uring is disabled here"))
struct SenderRestartTests {
    /// Runs `streamer send` of `frames` synthetic frames to `port` (`extra` options appended) to
    /// its end and returns its stats.
    static func send(_ binary: String, port: UInt16, frames: Int, directory: URL, name: String,
                     extra: [String] = []) throws -> [String: Any] {
        let stats = directory.appendingPathComponent("\(name).json")
        let outcome = try run(binary, ["send", "--to", "127.0.0.1:\(port)", "--size", "320x240", "--fps", "30",
                                       "--frames", "\(frames)", "--quiet", "--stats", stats.path] + extra, timeout: 120)
        #expect(outcome.status == 0, "\(name): \(outcome.stderr)")
        return try readJSON(stats)
    }

    @Test func aReceiverFollowsItsSenderStartedAgain() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("restart")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = nextPortPair()
        let receiver = try startReceiver(binary, port: port, seconds: 300, directory: directory, name: "recv")
        defer { if receiver.isRunning { kill(receiver.processIdentifier, SIGKILL) } }
        // Two senders one after the other, each ending with its BYE; then one without feedback
        // (so no RTCP, no BYE: it just stops), and one more started at once after it.
        let first = try Self.send(binary, port: port, frames: 45, directory: directory, name: "a")
        let second = try Self.send(binary, port: port, frames: 45, directory: directory, name: "b")
        // The receiver's stats are rewritten every 0.1 s: wait for the second's BYE and frames to show.
        var bothHere = try readJSON(directory.appendingPathComponent("recv.json"))
        for _ in 0..<50 where intField(bothHere, "rtcp.byeReceived") != 2 || intField(bothHere, "frames.complete") != 90 {
            Thread.sleep(forTimeInterval: 0.1)
            bothHere = try readJSON(directory.appendingPathComponent("recv.json"))
        }
        let silent = try Self.send(binary, port: port, frames: 30, directory: directory, name: "c", extra: ["--no-feedback"])
        let last = try Self.send(binary, port: port, frames: 150, directory: directory, name: "d", extra: ["--no-feedback"])
        Thread.sleep(forTimeInterval: 0.5)
        kill(receiver.processIdentifier, SIGINT)
        #expect(waitForExit(receiver, seconds: 15) == 0)
        let recv = try readJSON(directory.appendingPathComponent("recv.json"))
        let sent = [first, second, silent, last].map { intField($0, "packets.sent") ?? -1 }
        #expect(sent.allSatisfy { $0 > 0 })
        let ssrcs = [first, second, silent, last].map { intField($0, "ssrc") ?? -1 }
        #expect(Set(ssrcs).count == 4, "\(ssrcs)")

        // After the first two (the second followed at its first packets, the first having said BYE):
        // every packet and frame of both, decoded.
        #expect(intField(bothHere, "streamChanges") == 1 && intField(bothHere, "rtcp.byeReceived") == 2)
        #expect(intField(bothHere, "packets.received") == sent[0] + sent[1])
        #expect(intField(bothHere, "frames.complete") == 90 && intField(bothHere, "packets.lost") == 0)
        #expect((field(bothHere, "rejected") as? [String: Any])?.isEmpty == true, "\(bothHere)")

        // The silent one is taken whole after the second's BYE; the last one only once the silent
        // one had been quiet for 2 s: its packets before then are counted foreign (its port is
        // another), each of its packets either received or rejected.
        #expect(intField(recv, "streamChanges") == 3)
        let rejected = try #require(field(recv, "rejected") as? [String: Int])
        let lastRejected = rejected["foreignSource"] ?? 0
        #expect(rejected.keys.allSatisfy { $0 == "foreignSource" }, "\(rejected)")
        // (None of it, if a machine slow to start the last sender let 2 s pass before its first
        // packet. The 2 s are timed exactly in ReceiveSessionTests.)
        #expect(lastRejected < sent[3], "\(lastRejected) of \(sent[3])")
        #expect(intField(recv, "packets.received") == sent.reduce(0, +) - lastRejected)
        #expect(intField(recv, "packets.lost") == 0)
        #expect(intField(recv, "kernelDrops") == 0)
        let complete = try #require(intField(recv, "frames.complete"))
        #expect(complete > 90 + 30 && complete <= 90 + 30 + 150)
        if let probe = try probeDecodedFrames(directory.appendingPathComponent("recv.hevc").path) {
            // The last sender's first frames followed may wait for its next keyframe to decode.
            let undecodable = intField(recv, "frames.undecodable") ?? 0
            #expect(probe.frames >= complete - undecodable && probe.frames <= complete, "\(probe.frames) of \(complete)")
        }
    }

    /// ffmpeg started again: after its BYE (it sends one with `-rtpflags send_bye`) at once,
    /// without one after 2 s of silence. Every frame of the three runs complete and decoded.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/ffmpeg"), "needs ffmpeg"))
    func aReceiverFollowsFFmpegStartedAgain() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("restart-ffmpeg")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = nextPortPair()
        // The receiver's summary line is read from its stderr.
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: binary)
        receiver.arguments = ["recv", "--listen", "127.0.0.1:\(port)", "--quiet", "--duration", "300",
                              "--out", directory.appendingPathComponent("recv.hevc").path,
                              "--stats", directory.appendingPathComponent("recv.json").path]
        let receiverErrors = Pipe()
        receiver.standardError = receiverErrors
        try receiver.run()
        try waitUntilBound(port: port, address: "127.0.0.1")
        defer { if receiver.isRunning { kill(receiver.processIdentifier, SIGKILL) } }
        for (index, flags) in [["-rtpflags", "send_bye"], [], []].enumerated() {
            if index == 2 { Thread.sleep(forTimeInterval: 2.5) }  // the second sent no BYE
            let sent = try run("/usr/bin/ffmpeg", [
                "-v", "error", "-nostdin", "-re", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=30", "-frames:v", "30",
                "-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error:keyint=30"]
                + flags + ["-f", "rtp", "rtp://127.0.0.1:\(port)"], timeout: 60)
            #expect(sent.status == 0, "ffmpeg: \(sent.stderr)")
        }
        Thread.sleep(forTimeInterval: 0.5)
        kill(receiver.processIdentifier, SIGINT)
        #expect(waitForExit(receiver, seconds: 15) == 0)
        let summary = String(decoding: receiverErrors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(summary.hasSuffix(" bytes, 3 streams one after another\n") && summary.contains(": 90 complete and 0 incomplete frames,"),
                "\(summary)")
        let recv = try readJSON(directory.appendingPathComponent("recv.json"))
        #expect(intField(recv, "streamChanges") == 2 && intField(recv, "rtcp.byeReceived") == 1, "\(recv)")
        #expect(intField(recv, "frames.complete") == 90 && intField(recv, "frames.incomplete") == 0)
        #expect(intField(recv, "packets.lost") == 0 && intField(recv, "frames.undecodable") == 0)
        if let probe = try probeDecodedFrames(directory.appendingPathComponent("recv.hevc").path) {
            #expect(probe.frames == 90 && probe.stderr.isEmpty, "\(probe)")
        }
    }
}
