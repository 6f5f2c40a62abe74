import Foundation
import Glibc
import Testing
import TestSupport

/// Resident memory of a process, in bytes (VmRSS).
func residentBytes(_ pid: Int32) -> Int? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") else { return nil }
    return kilobytes * 1024
}

@Suite(.enabled(if: uringEnabled, "io_uring is disabled here"))
struct ReceiverStopTests {
    /// The receiver is stopped (SIGSTOP) for 10 s mid-stream: the sender never exceeds its
    /// bound on unconfirmed bytes (sampled every 100 ms), its memory stays flat, it says once
    /// that the receiver is gone, and after SIGCONT the receiver gets complete frames from a
    /// keyframe again within 2 s.
    @Test func stoppedReceiverKeepsTheSenderBounded() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("stop")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = nextPortPair()
        let bound = 150_000
        let recvStats = directory.appendingPathComponent("recv.json")
        let sendStats = directory.appendingPathComponent("send.json")
        // The receiver outlives the sender (stopped below once the sender is done): 570 frames of
        // x265 take longer than 19 s when it is short of CPU, and a receiver that ended first
        // would rightly be reported gone a second time.
        let receiver = try startReceiver(binary, port: port, seconds: 120, directory: directory, name: "recv")
        let sender = Process()
        sender.executableURL = URL(fileURLWithPath: binary)
        sender.arguments = ["send", "--to", "127.0.0.1:\(port)", "--duration", "19", "--size", "320x240",
                            "--bitrate", "1M", "--max-unconfirmed", "\(bound)", "--quiet",
                            "--stats", sendStats.path, "--stats-every", "0.1"]
        let senderErrors = Pipe()
        sender.standardError = senderErrors
        try sender.run()

        struct Sample { var time: Double; var send: [String: Any]; var recv: [String: Any]; var rss: Int }
        var samples: [Sample] = []
        let start = Date()
        var stopped: Double?
        var continued: Double?
        while sender.isRunning && Date().timeIntervalSince(start) < 30 {
            let now = Date().timeIntervalSince(start)
            if stopped == nil && now >= 3 { kill(receiver.processIdentifier, SIGSTOP); stopped = now }
            if continued == nil && now >= 13 { kill(receiver.processIdentifier, SIGCONT); continued = now }
            if let send = try? readJSON(sendStats), let recv = try? readJSON(recvStats),
               let rss = residentBytes(sender.processIdentifier) {
                samples.append(Sample(time: now, send: send, recv: recv, rss: rss))
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        if let stopped, continued == nil { kill(receiver.processIdentifier, SIGCONT); _ = stopped }
        #expect(waitForExit(sender, seconds: 10) == 0)
        kill(receiver.processIdentifier, SIGINT)  // a clean stop: final stats, exit 0
        #expect(waitForExit(receiver, seconds: 15) == 0)
        let messages = String(decoding: senderErrors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stopAt = try #require(stopped)
        let continueAt = try #require(continued)
        try #require(samples.count > 100)

        // The bound holds at every sample.
        let worst = samples.compactMap { intField($0.send, "bytes.unconfirmed") }.max() ?? 0
        #expect(worst <= bound, "unconfirmed reached \(worst) B")
        // The receiver is reported gone while stopped, once on stderr, and frames are dropped.
        let during = samples.filter { $0.time > stopAt + 2 && $0.time < continueAt }
        #expect(during.contains { field($0.send, "receiverGone") as? Bool == true })
        #expect(messages.components(separatedBy: "stopped sending feedback").count - 1 == 1, "stderr: \(messages)")
        let droppedAtStop = samples.last { $0.time <= stopAt }.flatMap { intField($0.send, "frames.droppedUnconfirmed") } ?? 0
        let droppedAtContinue = during.last.flatMap { intField($0.send, "frames.droppedUnconfirmed") } ?? 0
        #expect(droppedAtContinue > droppedAtStop + 100, "frames were not held back")
        // Memory stays flat while the receiver is stopped.
        let rssAtStop = try #require(samples.last { $0.time <= stopAt + 1 }?.rss)
        let rssPeak = during.map(\.rss).max() ?? 0
        #expect(rssPeak - rssAtStop < 4 << 20, "sender RSS grew from \(rssAtStop) to \(rssPeak)")
        // Within 2 s of SIGCONT: the receiver has a new complete keyframe and counts frames again.
        let keyframesAtContinue = samples.last { $0.time <= continueAt }.flatMap { intField($0.recv, "frames.keyframes") } ?? 0
        let resumed = samples.first { $0.time > continueAt && $0.time <= continueAt + 2
            && (intField($0.recv, "frames.keyframes") ?? 0) > keyframesAtContinue
            && field($0.send, "receiverGone") as? Bool == false }
        #expect(resumed != nil, "no new keyframe at the receiver within 2 s of SIGCONT")
        let final = try readJSON(sendStats)
        #expect((intField(final, "feedback.keyframeRequests") ?? 0) >= 1)
        // The stream it wrote decodes without error: frames resume at a keyframe.
        if let ffmpeg = ["/usr/bin/ffmpeg"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
            let decode = try run(ffmpeg, ["-v", "error", "-nostdin", "-i", directory.appendingPathComponent("recv.hevc").path,
                                          "-f", "null", "-"])
            #expect(decode.status == 0)
            #expect(decode.stderr.isEmpty, "ffmpeg: \(decode.stderr)")
        }
    }
}
