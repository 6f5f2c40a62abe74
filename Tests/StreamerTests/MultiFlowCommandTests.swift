import Foundation
import Glibc
import Testing
import TestSupport

/// Starts `streamer recv` on `address:port` for `frames` frames (or `seconds`), writing
/// `name.hevc` and rewriting `name.json` every 0.1 s in `directory`; `extra` options appended.
func startReceiver(_ binary: String, address: String = "127.0.0.1", port: UInt16, frames: Int? = nil,
                   seconds: Int? = nil, directory: URL, name: String, extra: [String] = []) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = ["recv", "--listen", "\(address):\(port)", "--quiet",
                         "--out", directory.appendingPathComponent("\(name).hevc").path,
                         "--stats", directory.appendingPathComponent("\(name).json").path, "--stats-every", "0.1"]
        + (frames.map { ["--frames", "\($0)"] } ?? []) + (seconds.map { ["--duration", "\($0)"] } ?? []) + extra
    process.standardError = FileHandle.nullDevice
    try process.run()
    try waitUntilBound(port: port, address: address)
    return process
}

/// `streamer send` with several `--to`: flows of one engine.
@Suite(.enabled(if: uringEnabled, "io_uring is disabled here"))
struct MultiFlowCommandTests {
    static let unshare = "/usr/bin/unshare"
    static let namespaceFlags = isRoot ? ["--mount"] : ["--map-root-user", "--mount"]
    /// Whether `unshare --mount` works here (root, or unprivileged user namespaces).
    static let canUnshareMount = FileManager.default.isExecutableFile(atPath: unshare)
        && (try? run(unshare, namespaceFlags + ["true"]))?.status == 0

    /// Two destinations, the second with its own class, ECN codepoint and pace: both receivers
    /// get every frame, each marked as its flow asked, and the stats JSON has both flows.
    @Test func twoDestinationsWithTheirOwnMarks() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("multi")
        defer { try? FileManager.default.removeItem(at: directory) }
        let ports = [nextPortPair(), nextPortPair()]
        let receivers = try ports.enumerated().map { index, port in
            try startReceiver(binary, port: port, frames: 60, directory: directory, name: "recv\(index)")
        }
        let sendStats = directory.appendingPathComponent("send.json")
        let sent = try run(binary, ["send", "--to", "127.0.0.1:\(ports[0])", "--to", "127.0.0.1:\(ports[1]),class=realtime,ecn=ect1,pace=3M",
                                    "--frames", "60", "--size", "320x240", "--quiet", "--stats", sendStats.path,
                                    "--sdp", directory.appendingPathComponent("x.sdp").path])
        #expect(sent.status == 0, "send: \(sent.stderr)")
        for receiver in receivers { #expect(waitForExit(receiver, seconds: 20) == 0) }
        let send = try readJSON(sendStats)
        let flows = try #require(send["flows"] as? [[String: Any]])
        try #require(flows.count == 2)
        #expect(intField(send, "pacing.flows") == 2)
        #expect(Set(flows.compactMap { $0["ssrc"] as? Int }).count == 2)
        // The default pace (1.5 x the 4 Mbit/s bitrate) and the second flow's own.
        #expect(flows.map { field($0, "pacing.rateBps") as? Double } == [6_000_000, 3_000_000])
        for (index, port) in ports.enumerated() {
            let recv = try readJSON(directory.appendingPathComponent("recv\(index).json"))
            let flow = flows[index]
            #expect(flow["destination"] as? String == "127.0.0.1:\(port)")
            #expect(intField(recv, "frames.complete") == 60, "flow \(index)")
            #expect(intField(recv, "packets.lost") == 0)
            #expect(intField(recv, "packets.received") == intField(flow, "packets.sent"))
            #expect(intField(flow, "packets.confirmed") == intField(flow, "packets.sent"))
            let received = intField(recv, "packets.received") ?? -1
            let (dscp, ecn) = index == 0 ? ("34", "ecn.ect0") : ("46", "ecn.ect1")
            #expect((recv["dscp"] as? [String: Int]) == [dscp: received], "flow \(index): \(recv["dscp"] ?? "-")")
            #expect(intField(recv, ecn) == received)
        }
        // The first flow's keys stay at the top level (the single-flow contract).
        #expect(intField(send, "packets.sent") == intField(flows[0], "packets.sent"))
        #expect(FileManager.default.fileExists(atPath: directory.appendingPathComponent("x.sdp").path))
        let second = try String(contentsOf: directory.appendingPathComponent("x-1.sdp"), encoding: .utf8)
        #expect(second.contains("m=video \(ports[1]) RTP/AVPF 96 97"))  // with retransmission (RFC 4585, 4588)
    }

    /// SIGHUP resolves `--to` again: the name now points at another receiver, the flow moves
    /// there (said once, counted in `redirects`) and the new receiver gets complete frames from a
    /// keyframe. The name is resolved through a private /etc/hosts (a mount namespace), so the
    /// test needs root or unprivileged user namespaces.
    @Test(.enabled(if: Self.canUnshareMount, "needs unshare --mount (root or user namespaces) for a private /etc/hosts"))
    func sighupMovesAFlowWhoseNameNowResolvesElsewhere() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let unshare = Self.unshare
        let namespaceFlags = Self.namespaceFlags
        let directory = try temporaryDirectory("sighup")
        defer { try? FileManager.default.removeItem(at: directory) }
        let hosts = directory.appendingPathComponent("hosts")
        try "127.0.0.1 streamer-test-receiver\n".write(to: hosts, atomically: false, encoding: .utf8)
        let port = nextPortPair()
        let first = try startReceiver(binary, address: "127.0.0.1", port: port, seconds: 20, directory: directory, name: "first")
        let second = try startReceiver(binary, address: "127.0.0.2", port: port, seconds: 20, directory: directory, name: "second")
        defer { for process in [first, second] where process.isRunning { process.terminate() } }
        let sendStats = directory.appendingPathComponent("send.json")
        let sender = Process()
        sender.executableURL = URL(fileURLWithPath: unshare)
        sender.arguments = namespaceFlags + ["sh", "-c", "mount --bind \"$0\" /etc/hosts && exec \"$@\"", hosts.path,
                                             binary, "send", "--to", "streamer-test-receiver:\(port)", "--duration", "6",
                                             "--size", "320x240", "--bitrate", "1M", "--quiet",
                                             "--stats", sendStats.path, "--stats-every", "0.1"]
        let errors = Pipe()
        sender.standardError = errors
        try sender.run()
        Thread.sleep(forTimeInterval: 2)
        let before = try readJSON(directory.appendingPathComponent("first.json"))
        // Same file, same inode (the bind mount follows the inode): rewrite it in place.
        let handle = try FileHandle(forWritingTo: hosts)
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data("127.0.0.2 streamer-test-receiver\n".utf8))
        try handle.close()
        kill(sender.processIdentifier, SIGHUP)
        Thread.sleep(forTimeInterval: 1)
        kill(sender.processIdentifier, SIGHUP)  // unchanged now: nothing said, nothing moved
        #expect(waitForExit(sender, seconds: 20) == 0)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        first.terminate()
        second.terminate()
        _ = waitForExit(first, seconds: 5)
        _ = waitForExit(second, seconds: 5)

        let send = try readJSON(sendStats)
        let moved = stderr.split(separator: "\n").filter { $0.contains("now resolves to 127.0.0.2:\(port)") }
        #expect(moved.count == 1, "stderr: \(stderr)")
        #expect(intField(send, "redirects") == 1)
        #expect(send["destination"] as? String == "127.0.0.2:\(port)")
        let firstStats = try readJSON(directory.appendingPathComponent("first.json"))
        let secondStats = try readJSON(directory.appendingPathComponent("second.json"))
        #expect((intField(before, "frames.complete") ?? 0) > 30, "the first receiver had the stream before")
        // After the move the second receiver decodes from a keyframe on: about 4 s of 30 fps.
        let complete = intField(secondStats, "frames.complete") ?? 0
        #expect(complete > 90, "second receiver: \(secondStats)")
        #expect(intField(secondStats, "frames.incomplete") == 0)
        #expect((intField(firstStats, "frames.complete") ?? 0) + complete <= intField(send, "frames.sent") ?? 0)
        // Every packet accounted: confirmed by the receiver it went to, or sent to the first one
        // but not yet confirmed when the flow moved (its feedback is not accepted after that).
        let abandoned = intField(send, "packets.abandoned") ?? -1
        #expect((0...20).contains(abandoned), "abandoned \(abandoned)")
        #expect(intField(send, "packets.confirmed") == (intField(send, "packets.sent") ?? 0) - abandoned,
                "both receivers confirmed what they got")
        #expect(intField(send, "packets.lost") == 0)
        if let ffmpeg = ["/usr/bin/ffmpeg"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
            let decode = try run(ffmpeg, ["-v", "error", "-nostdin", "-i", directory.appendingPathComponent("second.hevc").path,
                                          "-f", "null", "-"])
            #expect(decode.status == 0 && decode.stderr.isEmpty, "ffmpeg: \(decode.stderr)")
        }
    }

    /// `--rtcp-mux` at both ends (RFC 5761): feedback and sender reports share the RTP ports,
    /// every packet is confirmed, the RTT is measured, nothing is rejected, and the SDP says so.
    @Test func rtcpMuxCarriesFeedbackOnTheRTPPorts() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("mux")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = nextPortPair()
        let receiver = try startReceiver(binary, port: port, frames: 60, directory: directory, name: "recv",
                                         extra: ["--rtcp-mux"])
        let sent = try run(binary, ["send", "--to", "127.0.0.1:\(port)", "--rtcp-mux", "--frames", "60", "--size", "320x240",
                                    "--quiet", "--stats", directory.appendingPathComponent("send.json").path,
                                    "--sdp", directory.appendingPathComponent("x.sdp").path])
        #expect(sent.status == 0, "send: \(sent.stderr)")
        #expect(waitForExit(receiver, seconds: 20) == 0)
        let send = try readJSON(directory.appendingPathComponent("send.json"))
        let recv = try readJSON(directory.appendingPathComponent("recv.json"))
        #expect(intField(recv, "frames.complete") == 60)
        #expect(intField(recv, "packets.received") == intField(send, "packets.sent"))
        #expect(intField(send, "packets.confirmed") == intField(send, "packets.sent"))
        #expect((intField(send, "feedback.reports") ?? 0) > 10)
        #expect((intField(recv, "feedback.senderReports") ?? 0) > 0)
        #expect(field(send, "rttMs.smoothed") as? Double != nil)
        #expect((recv["rejected"] as? [String: Int])?.isEmpty ?? false, "\(recv["rejected"] ?? "-")")
        #expect(try String(contentsOf: directory.appendingPathComponent("x.sdp"), encoding: .utf8).contains("a=rtcp-mux"))
    }
}
