import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

/// The built `streamer` (beside the test bundle, or in .build/debug).
func streamerBinary() -> String? {
    var candidates: [URL] = []
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    for _ in 0..<4 {
        candidates.append(directory.appendingPathComponent("streamer"))
        directory = directory.deletingLastPathComponent()
    }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    candidates.append(root.appendingPathComponent(".build/debug/streamer"))
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }?.path
}

struct Outcome {
    var status: Int32
    var stdout: String
    var stderr: String
    var stderrLines: [Substring] { stderr.split(separator: "\n") }
}

/// Runs `executable` with `arguments`; kills it after `timeout` seconds.
func run(_ executable: String, _ arguments: [String], timeout: Double = 60) throws -> Outcome {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
    let stderrData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return Outcome(status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
                   stderr: String(decoding: stderrData, as: UTF8.self))
}

/// The frames ffprobe decodes from the H.265 file at `path`, and what it wrote on stderr;
/// nil when ffprobe is not installed.
func probeDecodedFrames(_ path: String) throws -> (frames: Int, stderr: String)? {
    guard let ffprobe = ["/usr/bin/ffprobe"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        return nil
    }
    let probe = try run(ffprobe, ["-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
                                  "stream=nb_read_frames", "-of", "csv=p=0", path])
    return (Int(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0, probe.stderr)
}

/// The version in `streamer --version`'s line (`streamer X.Y.Z (git ...)`).
func printedVersion(_ binary: String) throws -> String? {
    let words = try run(binary, ["--version"]).stdout.split(separator: " ")
    return words.count >= 2 ? String(words[1]) : nil
}

private let portCounter = Atomic<Int>(0)

/// A free RTP/RTCP port pair on loopback (even port and the next), unique among the tests of
/// this process (they run in parallel), checked free by binding both.
func nextPortPair() -> UInt16 {
    while true {
        let index = portCounter.add(1, ordering: .relaxed).newValue
        let port = 20_000 + Int(getpid() % 400) * 100 + (index * 2) % 100
        if isFree(port) && isFree(port + 1) { return UInt16(port) }
    }
}

/// 127.0.0.1:`port` as a `sockaddr_in`.
func loopbackIPv4(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}

private func isFree(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    defer { close(fd) }
    var address = loopbackIPv4(port: UInt16(port))
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

let uringEnabled = (try? String(contentsOfFile: "/proc/sys/kernel/io_uring_disabled", encoding: .utf8))
    .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) == "0" } ?? true

@Suite struct CommandLineTests {
    @Test(arguments: [["--help"], ["send", "--help"], ["recv", "--help"], ["demo", "--help"]])
    func helpExitsZero(arguments: [String]) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let outcome = try run(binary, arguments)
        #expect(outcome.status == 0)
        #expect(outcome.stdout.contains("usage: streamer"))
    }

    /// Bad arguments: one line naming the option, exit 2.
    @Test(arguments: [
        (["send"], "--to"),
        (["send"], "--rtsp"),
        (["send", "--to", "127.0.0.1:5004", "--rtsp", "8554"], "exactly one of --to"),
        (["send", "--rtsp", "70000"], "--rtsp"),
        (["send", "--rtsp", "127.0.0.1:8554", "--sdp", "x.sdp"], "--sdp"),
        (["send", "--to", "127.0.0.1:5004", "--ecn", "foo"], "--ecn"),
        (["send", "--to", "127.0.0.1:5004", "--class", "gold"], "--class"),
        (["send", "--to", "127.0.0.1:5004", "--size", "7x5"], "--size"),
        (["send", "--to", "127.0.0.1:5004", "--bitrate", "fast"], "--bitrate"),
        (["send", "--to", "127.0.0.1:5004", "--mtu", "12"], "--mtu"),
        (["send", "--to", "127.0.0.1:5004", "--frames"], "--frames"),
        (["send", "--to", "nowhere.invalid:5004"], "--to"),
        (["send", "--to", "127.0.0.1:99999"], "--to"),
        (["send", "--to", "127.0.0.1:5004", "--source", "/nonexistent.hevc"], "--source"),
        (["send", "--to", "127.0.0.1:5004", "--to", "127.0.0.1:5006,class=gold"], "class"),
        (["send", "--to", "127.0.0.1:5004,color=red"], "--to"),
        (["send", "--to", "127.0.0.1:5004", "--local-port", "5001"], "--local-port"),
        (["send", "--rtsp", "8554", "--local-port", "6000"], "--local-port"),
        (["send", "--to", "127.0.0.1:5004", "--to", "127.0.0.1:5006", "--local-port", "65534"], "--local-port"),
        (["recv", "--listen", "70000"], "--listen"),
        (["recv"], "--listen"),
        (["recv", "--listen", "5004", "--bogus"], "--bogus"),
        (["recv", "--listen", "5004", "--feedback-interval", "0.0001"], "--feedback-interval"),
        (["send", "--to", "127.0.0.1:5004,pace=fast"], "pace"),
        (["send", "--rtsp", "8554", "--fast"], "--fast"),
        (["send", "--to", "127.0.0.1:5004", "--fast", "--duration", "2"], "--fast"),
        (["send", "--to", "127.0.0.1:5004", "--fast", "--cc", "on"], "--fast"),
        (["send", "--rtsp", "8554", "--record", "x.hevc"], "--record"),
        (["send", "--to", "127.0.0.1:5004", "--record", "/nonexistent/dir/x.hevc"], "--record"),
        (["send", "--to", "127.0.0.1:5004,speed=3M"], "pace=RATE"),
        (["recv", "--listen", "5004", "--feedback-interval", "soon"], "--feedback-interval"),
        (["fly"], "fly"),
        ([], "usage"),
    ])
    func badArgumentsExitTwoWithOneLine(arguments: [String], mentions: String) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let outcome = try run(binary, arguments)
        #expect(outcome.status == 2)
        if !arguments.isEmpty { #expect(outcome.stderrLines.count == 1, "stderr: \(outcome.stderr)") }
        #expect(outcome.stderr.contains(mentions), "stderr: \(outcome.stderr)")
    }

    /// `streamer --version` and `streamer version`: one line, `streamer X.Y.Z (git SHA|unknown)`, exit 0.
    @Test(arguments: [["--version"], ["version"]])
    func versionIsOneLine(arguments: [String]) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let outcome = try run(binary, arguments)
        #expect(outcome.status == 0)
        #expect(outcome.stderr.isEmpty)
        let lines = outcome.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 2 && lines[1].isEmpty, "stdout: \(outcome.stdout)")
        #expect(lines[0].wholeMatch(of: /streamer [0-9]+\.[0-9]+\.[0-9]+ \(git ([0-9a-f]{7,40}|unknown)\)/) != nil,
                "stdout: \(outcome.stdout)")
    }

    /// `streamer demo --stats`: a `version` key (the one `--version` prints) at the top and both
    /// ends' stats; every frame arrives.
    @Test(.enabled(if: uringEnabled, "io_uring is disabled here"))
    func demoStatsCarryTheVersion() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("demo-stats")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("demo.json").path
        let outcome = try run(binary, ["demo", "--seconds", "1", "--size", "160x96", "--stats", path])
        #expect(outcome.status == 0, "demo: \(outcome.stderr)")
        let object = try readJSON(URL(fileURLWithPath: path))
        #expect(object["role"] as? String == "demo")
        #expect(object["version"] as? String == (try printedVersion(binary)))
        #expect(intField(object, "send.frames.sent") == 30)
        #expect(intField(object, "recv.frames.complete") == 30)
    }

    /// `tools/fuzz` takes exactly the options of its usage line: anything else is one line, exit 2
    /// (before anything is built).
    @Test(arguments: [["--jobs", "2"], ["--bogus"], ["--seconds"], ["--seconds", "soon"], ["--seconds=3"], ["no-such-target"]])
    func fuzzRejectsWhatItsUsageDoesNotList(arguments: [String]) throws {
        let outcome = try run(packageRoot.appendingPathComponent("tools/fuzz").path, arguments)
        #expect(outcome.status == 2)
        #expect(outcome.stderrLines.count == 1, "stderr: \(outcome.stderr)")
        #expect(outcome.stdout.isEmpty)
    }

    /// A busy port is a runtime failure: one line, exit 1.
    @Test func busyPortExitsOne() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let holder = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(holder) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(holder, pointer, length)
                getsockname(holder, pointer, &length)
            }
        }
        let port = UInt16(bigEndian: address.sin_port)
        let outcome = try run(binary, ["recv", "--listen", "127.0.0.1:\(port)", "--frames", "1"])
        #expect(outcome.status == 1)
        #expect(outcome.stderrLines.count == 1)
        #expect(outcome.stderr.contains("cannot bind") && outcome.stderr.contains("in use"), "stderr: \(outcome.stderr)")
    }

    /// No route to the destination (a fresh namespace with only loopback): one line, exit 1.
    @Test(.enabled(if: geteuid() == 0, "needs root (network namespace)"))
    func unreachableDestinationExitsOne() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let namespace = "sl-unr-\(getpid())"
        _ = try run("/usr/sbin/ip", ["netns", "add", namespace])
        defer { _ = try? run("/usr/sbin/ip", ["netns", "del", namespace]) }
        _ = try run("/usr/sbin/ip", ["-n", namespace, "link", "set", "lo", "up"])
        let outcome = try run("/usr/sbin/ip", ["netns", "exec", namespace, binary, "send", "--to", "10.77.9.9:5004",
                                               "--frames", "3", "--size", "64x64", "--quiet"])
        #expect(outcome.status == 1)
        #expect(outcome.stderrLines.count == 1, "stderr: \(outcome.stderr)")
        #expect(outcome.stderr.lowercased().contains("unreachable"), "stderr: \(outcome.stderr)")
    }

    /// `streamer recv` and `streamer send` as two processes: every frame arrives, the stats
    /// JSON has every key of the contract, and the written stream decodes.
    @Test(.enabled(if: uringEnabled, "io_uring is disabled here"))
    func sendAndReceiveAsTwoProcesses() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = Int(nextPortPair())
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: binary)
        receiver.arguments = ["recv", "--listen", "127.0.0.1:\(port)", "--frames", "45", "--quiet",
                              "--out", directory.appendingPathComponent("x.hevc").path,
                              "--stats", directory.appendingPathComponent("recv.json").path]
        receiver.standardError = FileHandle.nullDevice
        try receiver.run()
        try waitUntilBound(port: UInt16(port))  // the sender's first frames would otherwise be refused
        let sent = try run(binary, ["send", "--to", "127.0.0.1:\(port)", "--frames", "45", "--size", "320x240",
                                    "--quiet", "--stats", directory.appendingPathComponent("send.json").path,
                                    "--sdp", directory.appendingPathComponent("x.sdp").path])
        #expect(sent.status == 0, "send: \(sent.stderr)")
        #expect(waitForExit(receiver, seconds: 20) == 0)

        let send = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("send.json")))
        let recv = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("recv.json")))
        let sendKeys = ["role", "version", "rttMs.median", "rttMs.p95", "rttMs.samples", "packets.sent", "packets.confirmed", "packets.lost", "packets.unconfirmed", "bytes.sent",
                        "bytes.unconfirmed", "frames.encoded", "frames.sent", "frames.droppedUnconfirmed",
                        "frames.keyframes", "path.mtu", "path.mtuSource", "path.datagramSize", "path.clamped",
                        "rttMs.last", "rttMs.min", "rttMs.smoothed", "ecn.codepoint", "ecn.ceReported", "dscp",
                        "pacing.rateBps", "pacing.batches", "pacing.datagramsPerSubmit", "pacing.gso",
                        "cpu.userSeconds", "cpu.systemSeconds"]
        let recvKeys = ["role", "version", "packets.received", "packets.lost", "packets.late", "packets.duplicate",
                        "packets.reordered", "ecn.notEct", "ecn.ect0", "ecn.ect1", "ecn.ce", "dscp", "frames.complete",
                        "frames.incomplete", "frames.missing", "bytes.received", "cpu.userSeconds", "cpu.systemSeconds"]
        func value(_ object: Any, _ path: String) -> Any? {
            path.split(separator: ".").reduce(Optional(object)) { ($0 as? [String: Any])?[String($1)] }
        }
        for key in sendKeys { #expect(value(send, key) != nil, "send stats lack \(key)") }
        for key in recvKeys { #expect(value(recv, key) != nil, "recv stats lack \(key)") }
        let version = try #require(try printedVersion(binary))
        #expect(value(send, "version") as? String == version)
        #expect(value(recv, "version") as? String == version)
        // Feedback came while media flowed: the run's RTT is there, within what was seen.
        if let samples = value(send, "rttMs.samples") as? Int, samples > 0,
           let median = value(send, "rttMs.median") as? Double, let p95 = value(send, "rttMs.p95") as? Double,
           let minimum = value(send, "rttMs.min") as? Double {
            #expect(median >= minimum * 0.99 && p95 >= median)
        }
        #expect(value(send, "frames.sent") as? Int == 45)
        #expect(value(recv, "frames.complete") as? Int == 45)
        #expect(value(recv, "packets.lost") as? Int == 0)
        #expect(value(recv, "packets.received") as? Int == value(send, "packets.sent") as? Int)
        #expect(value(recv, "ecn.ect0") as? Int == value(send, "packets.sent") as? Int)
        #expect((value(recv, "dscp") as? [String: Int])?["34"] == value(send, "packets.sent") as? Int)
        let sdp = try String(contentsOf: directory.appendingPathComponent("x.sdp"), encoding: .utf8)
        #expect(sdp.contains("a=rtpmap:96 H265/90000") && sdp.contains("sprop-sps="))
        // RFC 4588 / 5576: the SSRCs the stream was sent from, media first, both with the CNAME.
        let media = try #require(value(send, "ssrc") as? Int)
        let rtx = try #require(value(send, "rtx.ssrc") as? Int)
        #expect(media != rtx && sdp.contains("a=fmtp:97 apt=96;rtx-time=500\r\na=ssrc-group:FID \(media) \(rtx)\r\n"))
        let cnames = sdp.split(separator: "\r\n").filter { $0.hasPrefix("a=ssrc:") }
        #expect(cnames.count == 2 && cnames[0].hasPrefix("a=ssrc:\(media) cname:") && cnames[1].hasPrefix("a=ssrc:\(rtx) cname:")
                && cnames[0].split(separator: " ").last == cnames[1].split(separator: " ").last)
        if let probe = try probeDecodedFrames(directory.appendingPathComponent("x.hevc").path) {
            #expect(probe.frames == 45)
            #expect(probe.stderr.isEmpty, "ffprobe: \(probe.stderr)")
        }
    }

    /// A send to a loopback port nobody listens on: the run ends normally; its summary is plain
    /// text, and the sends refused (the port-unreachable ICMP of one datagram fails a later send,
    /// as far as the kernel's ICMP rate limit lets it) are named in words with the count the
    /// stats JSON keeps, on one line.
    @Test(.enabled(if: uringEnabled, "io_uring is disabled here"))
    func refusedSendsAreSummedInWordsAsTheStatsCountThem() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stats = directory.appendingPathComponent("send.json")
        let port = Int(nextPortPair())
        let sent = try run(binary, ["send", "--to", "127.0.0.1:\(port)", "--frames", "20", "--size", "160x96",
                                    "--no-feedback", "--quiet", "--stats", stats.path])
        #expect(sent.status == 0, "send: \(sent.stderr)")
        let object = try readJSON(stats)
        let flow = try #require((object["flows"] as? [[String: Any]])?.first)
        let failed = try #require(intField(flow, "packets.failed"))
        let sentPackets = try #require(intField(flow, "packets.sent"))
        let errors = try #require(field(flow, "errors") as? [String: Any])
        #expect(errors.values.compactMap { $0 as? Int }.reduce(0, +) == failed, "errors: \(errors)")
        #expect(sent.stderrLines.contains("streamer send: 20 frames, \(sentPackets) packets, \(intField(flow, "bytes.sent") ?? -1) bytes to 127.0.0.1:\(port), largest datagram \(intField(flow, "path.datagramSize") ?? -1) B (MTU \(intField(flow, "path.mtu") ?? -1), kernel)"),
                "stderr: \(sent.stderr)")
        let lines = sent.stderrLines.filter { $0.contains("failed to send") }
        if failed > 0 {
            let refused = intField(flow, "errors.Connection refused") ?? -1
            #expect(lines == ["streamer send: \(failed) packets to 127.0.0.1:\(port) failed to send: Connection refused (\(refused))"],
                    "stderr: \(sent.stderr)")
        } else {
            #expect(lines.isEmpty, "stderr: \(sent.stderr)")
        }
    }

    /// `--stats` naming a device (here a node of /dev/null's numbers made for the test, as
    /// `/dev/stdout` or `/dev/null` would be) is written through: the stats file is otherwise
    /// replaced by a rename, which would put a regular file in the node's place.
    @Test(.enabled(if: uringEnabled && isRoot, "needs io_uring and root (mknod)"))
    func statsToADeviceAreWrittenThroughNotRenamedOverIt() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("stats-device")
        defer { try? FileManager.default.removeItem(at: directory) }
        let node = directory.appendingPathComponent("null").path
        // dev_t of major 1, minor 3 (glibc's makedev is a macro): (1 << 8) | 3.
        let made = mknod(node, S_IFCHR | 0o666, dev_t(1 << 8 | 3)) == 0
        #expect(made, "mknod: \(String(cString: strerror(errno)))")
        guard made else { return }
        let port = Int(nextPortPair())
        let received = try run(binary, ["recv", "--listen", "127.0.0.1:\(port)", "--duration", "1", "--quiet",
                                        "--stats", node, "--stats-every", "0.1"])
        #expect(received.status == 0, "recv: \(received.stderr)")
        let type = try FileManager.default.attributesOfItem(atPath: node)[.type] as? FileAttributeType
        #expect(type == .typeCharacterSpecial)
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(left == ["null"], "no temporary file left: \(left)")
    }

    /// `streamer recv --out` to a file that cannot take the frames (/dev/full): the receiver
    /// stops at the first failed write and says so in one line, exit status 1, no crash.
    @Test(.enabled(if: uringEnabled && FileManager.default.isWritableFile(atPath: "/dev/full"), "io_uring is disabled here, or no /dev/full"))
    func aFailedOutputWriteEndsTheReceiverWithOneLine() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let port = Int(nextPortPair())
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: binary)
        receiver.arguments = ["recv", "--listen", "127.0.0.1:\(port)", "--frames", "45", "--quiet", "--out", "/dev/full"]
        let errors = Pipe()
        receiver.standardError = errors
        try receiver.run()
        try waitUntilBound(port: UInt16(port))
        let sent = try run(binary, ["send", "--to", "127.0.0.1:\(port)", "--frames", "10", "--size", "320x240", "--quiet"])
        #expect(sent.status == 0, "send: \(sent.stderr)")
        #expect(waitForExit(receiver, seconds: 20) == 1)
        let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let failures = stderr.split(separator: "\n").filter { $0.contains("cannot write") }
        #expect(failures.count == 1 && failures[0].contains("--out '/dev/full'"), "stderr: \(stderr)")
        // Written through, not replaced by a regular file.
        let type = try FileManager.default.attributesOfItem(atPath: "/dev/full")[.type] as? FileAttributeType
        #expect(type == .typeCharacterSpecial)
    }

    /// x265's CPU in `--stats` (`cpu.encoderSeconds`: more than 0, less than the process's), and
    /// `--record`: the access units sent, as Annex B, which `--fast` then sends again from the
    /// file at 1 frame per second faster than that (in real time the 90 frames would take
    /// 90 s, beyond the run's 60 s limit); the receiver completes every frame of both runs.
    @Test(.enabled(if: uringEnabled, "io_uring is disabled here"))
    func encoderCPUAndRecordAndFast() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let recorded = directory.appendingPathComponent("sent.hevc").path
        func value(_ object: Any?, _ path: String) -> Any? {
            path.split(separator: ".").reduce(object) { ($0 as? [String: Any])?[String($1)] }
        }
        for (index, arguments) in [["--size", "640x360", "--fast", "--record", recorded],
                                   ["--source", recorded, "--fps", "1", "--fast"]].enumerated() {
            let port = Int(nextPortPair())
            let receiver = Process()
            receiver.executableURL = URL(fileURLWithPath: binary)
            receiver.arguments = ["recv", "--listen", "127.0.0.1:\(port)", "--frames", "90", "--quiet", "--no-feedback",
                                  "--stats", directory.appendingPathComponent("recv\(index).json").path]
            receiver.standardError = FileHandle.nullDevice
            try receiver.run()
            try waitUntilBound(port: UInt16(port))
            let statsPath = directory.appendingPathComponent("send\(index).json").path
            let sent = try run(binary, ["send", "--to", "127.0.0.1:\(port)", "--frames", "90", "--no-feedback", "--quiet",
                                        "--stats", statsPath] + arguments)
            #expect(sent.status == 0, "send \(arguments): \(sent.stderr)")
            #expect(waitForExit(receiver, seconds: 20) == 0)
            let send = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: statsPath)))
            let recv = try JSONSerialization.jsonObject(with: Data(contentsOf: directory.appendingPathComponent("recv\(index).json")))
            #expect(value(send, "frames.sent") as? Int == 90)
            #expect(value(recv, "frames.complete") as? Int == 90)
            #expect(value(recv, "packets.received") as? Int == value(send, "packets.sent") as? Int)
            let encoder = try #require(value(send, "cpu.encoderSeconds") as? Double)
            let total = (value(send, "cpu.userSeconds") as? Double ?? 0) + (value(send, "cpu.systemSeconds") as? Double ?? 0)
            if index == 0 {
                #expect(encoder > 0 && encoder < total, "encoder \(encoder) s of \(total) s")
                if let probe = try probeDecodedFrames(recorded) {
                    #expect(probe.frames == 90)
                    #expect(probe.stderr.isEmpty, "ffprobe: \(probe.stderr)")
                }
            } else {
                #expect(encoder == 0)  // a .hevc file is not encoded
            }
        }
    }
}
