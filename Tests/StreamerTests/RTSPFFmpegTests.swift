import Foundation
import Glibc
import Testing
import TestSupport

private let ffmpegPath = "/usr/bin/ffmpeg"
private let hasFFmpeg = FileManager.default.isExecutableFile(atPath: ffmpegPath)

/// Waits until something listens on TCP `port` (read from /proc/net/tcp), up to 10 s.
private func waitUntilListening(port: UInt16) throws {
    let suffix = ":" + String(format: "%04X", port)
    let deadline = Date().addingTimeInterval(10)
    while Date() < deadline {
        if procFileText("/proc/net/tcp").split(separator: "\n").contains(where: {
            let fields = $0.split(separator: " ")
            return fields.count > 3 && fields[1].hasSuffix(suffix) && fields[3] == "0A"
        }) { return }
        Thread.sleep(forTimeInterval: 0.02)
    }
    throw LabError("nothing listens on TCP port \(port) within 10 s")
}

/// `streamer send --rtsp` on loopback with `arguments`, stats rewritten every 100 ms.
private func startRTSPSender(port: UInt16, statsPath: String, _ arguments: [String]) throws -> (Process, Pipe) {
    let binary = try #require(streamerBinary(), "streamer not built")
    let sender = Process()
    sender.executableURL = URL(fileURLWithPath: binary)
    sender.arguments = ["send", "--rtsp", "127.0.0.1:\(port)", "--size", "320x240", "--bitrate", "4M",
                        "--stats", statsPath, "--stats-every", "0.1"] + arguments
    let errors = Pipe()
    sender.standardError = errors
    sender.standardOutput = FileHandle.nullDevice
    try sender.run()
    try waitUntilListening(port: port)
    return (sender, errors)
}

/// ffmpeg as the RTSP client (RTP over UDP), decoding to nowhere.
private func startFFmpeg(port: UInt16) throws -> (Process, Pipe) {
    let ffmpeg = Process()
    ffmpeg.executableURL = URL(fileURLWithPath: ffmpegPath)
    ffmpeg.arguments = ["-nostdin", "-v", "error", "-rtsp_transport", "udp", "-i", "rtsp://127.0.0.1:\(port)/stream",
                        "-f", "null", "-"]
    let errors = Pipe()
    ffmpeg.standardError = errors
    ffmpeg.standardOutput = FileHandle.nullDevice
    try ffmpeg.run()
    return (ffmpeg, errors)
}

/// Sends `request` on a new TCP connection to loopback `port`; returns what came back
/// before the server closed the connection (or 5 s passed).
private func exchange(port: UInt16, _ request: [UInt8]) -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = loopbackIPv4(port: port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return "connect failed: errno \(errno)" }
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    shutdown(fd, Int32(SHUT_WR))  // the server sees the end after the requests
    var reply: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = recv(fd, &buffer, buffer.count, 0)
        if count <= 0 { break }
        reply += buffer.prefix(count)
    }
    return String(decoding: reply, as: UTF8.self)
}

private struct Sample {
    var time: Double
    var stats: [String: Any]
    func int(_ path: String) -> Int { intField(stats, path) ?? 0 }
}

/// ffmpeg 5.1 sends receiver reports only on its RTSP path (its SDP input cannot write to
/// the socket). Served over RTSP, its reports reach the sender's feedback socket.
@Suite(.enabled(if: uringEnabled, "io_uring is disabled here"),
       .enabled(if: hasFFmpeg, "ffmpeg is not installed (/usr/bin/ffmpeg): RTSP interop tests skipped"))
struct RTSPFFmpegTests {
    /// ffmpeg plays 10 s over RTSP: its receiver reports confirm packets as the stream runs,
    /// the sender never takes it for a receiver without feedback, and every packet is
    /// accounted for at the end.
    @Test func ffmpegReceiverReportsConfirmPackets() throws {
        let directory = try temporaryDirectory("rtsp")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stats = directory.appendingPathComponent("send.json")
        let port = nextPortPair()
        let (sender, senderErrors) = try startRTSPSender(port: port, statsPath: stats.path, ["--duration", "10"])
        let (ffmpeg, ffmpegErrors) = try startFFmpeg(port: port)
        var samples: [Sample] = []
        let start = Date()
        while sender.isRunning && Date().timeIntervalSince(start) < 30 {
            if let object = try? readJSON(stats) { samples.append(Sample(time: Date().timeIntervalSince(start), stats: object)) }
            Thread.sleep(forTimeInterval: 0.1)
        }
        #expect(waitForExit(sender, seconds: 10) == 0)
        #expect(waitForExit(ffmpeg, seconds: 10) == 0, "ffmpeg did not end when the session did")
        let messages = String(decoding: senderErrors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let ffmpegMessages = String(decoding: ffmpegErrors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(ffmpegMessages.isEmpty, "ffmpeg: \(ffmpegMessages)")

        let final = try readJSON(stats)
        let sent = intField(final, "packets.sent") ?? 0
        let confirmed = intField(final, "packets.confirmed") ?? 0
        let lost = intField(final, "packets.lost") ?? 0
        try #require(sent > 1000, "sent \(sent)")
        // The reports came from ffmpeg: the only peer of the sender's RTCP socket.
        #expect(field(final, "rtsp.client") as? String != nil)
        #expect(field(final, "feedback.absent") as? Bool == false, "stderr: \(messages)")
        #expect(!messages.contains("no RTCP feedback"), "stderr: \(messages)")
        #expect((intField(final, "feedback.reports") ?? 0) >= 5)
        // The session ended with the stream: the sender finished, or ffmpeg tore it down at the
        // stream's end (it ends its input at the sender's BYE; on a starved machine its TEARDOWN
        // can come before the server notices the sender is done), the whole 10 s (300 frames)
        // made by then. A TEARDOWN before that would be ffmpeg giving up.
        let ended = field(final, "rtsp.ended") as? String
        #expect(ended == "finished" || (ended == "teardown" && intField(final, "frames.encoded") == 300),
                "ended \(ended ?? "-"), frames \(field(final, "frames") ?? "-")")
        // Confirmed grows while the stream runs (seen in several samples, not only at the end).
        let confirmedValues = Set(samples.map { $0.int("packets.confirmed") }.filter { $0 > 0 })
        #expect(confirmedValues.count >= 5, "confirmed took the values \(confirmedValues.sorted())")
        // Exact accounting: every packet ends up confirmed or lost, or is still unconfirmed when
        // the sender's last wait for feedback (`finalFeedbackWait`, 2 s) ends: ffmpeg reports by
        // bytes received, so none comes after the last packet, and the tail ages into lost only
        // after 2.5 report intervals (`SenderFeedback.lossTimeout`, about 2 s at ffmpeg's rhythm).
        let unconfirmed = intField(final, "packets.unconfirmed") ?? -1
        #expect(confirmed + lost + unconfirmed == sent, "confirmed \(confirmed), lost \(lost), unconfirmed \(unconfirmed)")
        print("rtsp: sent \(sent), confirmed \(confirmed) (\(confirmed * 100 / max(sent, 1)) %), lost \(lost), reports \(intField(final, "feedback.reports") ?? 0)")
        // ffmpeg reports every 280,000 received bytes (rtpdec.c): about every 0.6-0.8 s here.
        // Loss aging follows the measured report interval, so what ffmpeg received is confirmed,
        // not declared lost before its report comes; only the tail after its last report
        // (under 280,000 bytes) can end unconfirmed and so lost.
        // ffmpeg cannot confirm path-MTU probes (it would count each as a packet of the stream,
        // thousands "missed"): none go out to it; the kernel's view of the path sizes the packets.
        #expect(intField(final, "path.probes.sent") == 0)
        #expect(field(final, "path.mtuSource") as? String == "kernel")
        #expect((intField(final, "path.datagramSize") ?? 0) > 1400)
        let interval = field(final, "feedback.intervalMs") as? Double ?? 0
        #expect(interval > 300 && interval < 2000, "ffmpeg's report interval \(interval) ms")
        // ffmpeg counts RTP payload bytes; 10 % for the variation of packet sizes in the tail.
        let tail = 280_000 * 11 / 10 / max(1, (intField(final, "bytes.sent") ?? 1) / sent - 12) + 1
        #expect(lost + unconfirmed <= tail, "lost \(lost) and \(unconfirmed) unconfirmed of \(sent) (the unreported tail is at most \(tail) packets)")
    }

    /// ffmpeg is stopped (SIGSTOP) mid-stream for at least 5 s and longer than the sender's own
    /// silence limit (four of ffmpeg's report intervals as the sender measured them): the sender
    /// holds its bound, says once that the receiver is gone, and after SIGCONT ffmpeg's reports
    /// confirm packets again.
    @Test func stoppedFFmpegKeepsTheSenderBounded() throws {
        let directory = try temporaryDirectory("rtsp-stop")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stats = directory.appendingPathComponent("send.json")
        let port = nextPortPair()
        // Above ffmpeg's report quantum (280,000 received bytes): a smaller bound stalls the
        // stream until the loss timeout frees it, because ffmpeg reports nothing before it.
        let bound = 400_000
        let (sender, senderErrors) = try startRTSPSender(port: port, statsPath: stats.path,
                                                         ["--duration", "16", "--max-unconfirmed", "\(bound)"])
        let (ffmpeg, _) = try startFFmpeg(port: port)
        var samples: [Sample] = []
        let start = Date()
        var stopped: Double?
        var continued: Double?
        // When to continue: 5 s after the stop, or 4 report intervals and 3 s more when that is
        // later (ffmpeg reports per 280,000 bytes received: ~0.6 s at 4 Mbit/s, slower where a
        // starved x265 makes less).
        var continueBy = Double.infinity
        while sender.isRunning && Date().timeIntervalSince(start) < 60 {
            let now = Date().timeIntervalSince(start)
            let latest = try? readJSON(stats)
            if let latest { samples.append(Sample(time: now, stats: latest)) }
            if stopped == nil && now >= 4, let latest, (intField(latest, "packets.confirmed") ?? 0) > 0 {
                kill(ffmpeg.processIdentifier, SIGSTOP)
                stopped = now
                let interval = (field(latest, "feedback.intervalMs") as? Double ?? 0) / 1000
                continueBy = now + max(5, 4 * interval + 3)
            }
            if stopped != nil && continued == nil && now >= continueBy {
                kill(ffmpeg.processIdentifier, SIGCONT)
                continued = now
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        if continued == nil { kill(ffmpeg.processIdentifier, SIGCONT) }
        let senderStatus = waitForExit(sender, seconds: 10)
        let messages = String(decoding: senderErrors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(senderStatus == 0, "sender: \(messages)")
        #expect(waitForExit(ffmpeg, seconds: 10) == 0)
        let stopAt = try #require(stopped, "the sender ended before ffmpeg was stopped: \(messages)")
        let continueAt = try #require(continued)
        try #require(samples.count > 100)

        let worst = samples.map { $0.int("bytes.unconfirmed") }.max() ?? 0
        #expect(worst <= bound, "unconfirmed reached \(worst) B")
        let goneAt = samples.first { $0.time > stopAt && field($0.stats, "receiverGone") as? Bool == true }?.time
        #expect(goneAt != nil && goneAt! < continueAt, "the sender never took the stopped ffmpeg for gone")
        #expect(messages.components(separatedBy: "stopped sending feedback").count - 1 == 1, "stderr: \(messages)")
        let confirmedAtContinue = samples.last { $0.time <= continueAt }?.int("packets.confirmed") ?? 0
        let resumed = samples.first { $0.time > continueAt && $0.int("packets.confirmed") > confirmedAtContinue }
        #expect(resumed != nil, "no confirmations after SIGCONT")
        let final = try readJSON(stats)
        #expect(field(final, "feedback.absent") as? Bool == false)
        print("rtsp stop: stopped \(String(format: "%.1f", continueAt - stopAt)) s, unconfirmed peak \(worst) B (bound \(bound)), gone \(goneAt.map { String(format: "%.1f", $0 - stopAt) } ?? "-") s after SIGSTOP, confirmations again \(resumed.map { String(format: "%.1f", $0.time - continueAt) } ?? "-") s after SIGCONT")
    }

    /// Malformed and oversized requests get a 4xx and a closed connection; the server then
    /// serves ffmpeg normally and exits cleanly.
    @Test func badRequestsAreRejectedAndServingGoesOn() throws {
        let directory = try temporaryDirectory("rtsp-bad")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stats = directory.appendingPathComponent("send.json")
        let port = nextPortPair()
        let (sender, _) = try startRTSPSender(port: port, statsPath: stats.path, ["--frames", "60", "--quiet"])
        let garbage = exchange(port: port, Array("HELLO THERE\r\nCSeq: 1\r\n\r\n".utf8))
        #expect(garbage.hasPrefix("RTSP/1.0 400 Bad Request\r\n"), "reply: \(garbage)")
        let huge = exchange(port: port, Array(("OPTIONS * RTSP/1.0\r\nCSeq: 2\r\n" + String(repeating: "X-Pad: aaaaaaaaaa\r\n", count: 2000)).utf8))
        #expect(huge.hasPrefix("RTSP/1.0 431 "), "reply: \(huge)")
        let tcp = exchange(port: port, Array("OPTIONS rtsp://127.0.0.1/stream RTSP/1.0\r\nCSeq: 3\r\n\r\nSETUP rtsp://127.0.0.1/stream/track1 RTSP/1.0\r\nCSeq: 4\r\nTransport: RTP/AVP/TCP;unicast;interleaved=0-1\r\n\r\n".utf8))
        #expect(tcp.contains("RTSP/1.0 200 OK\r\nCSeq: 3\r\nPublic: "), "reply: \(tcp)")
        #expect(tcp.contains("RTSP/1.0 461 Unsupported Transport\r\nCSeq: 4\r\n"), "reply: \(tcp)")
        #expect(sender.isRunning)
        let (ffmpeg, _) = try startFFmpeg(port: port)
        #expect(waitForExit(sender, seconds: 30) == 0)
        #expect(waitForExit(ffmpeg, seconds: 10) == 0)
        let final = try readJSON(stats)
        #expect(intField(final, "frames.sent") == 60)
        #expect(intField(final, "rtsp.connections") == 4)
        #expect((intField(final, "rtsp.rejected") ?? 0) >= 3)
        #expect((intField(final, "feedback.reports") ?? 0) > 0)
    }
}
