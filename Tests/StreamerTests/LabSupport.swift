import Foundation
import Glibc
import Testing
import TestSupport

let isRoot = geteuid() == 0
let hasNft = FileManager.default.isExecutableFile(atPath: "/usr/sbin/nft")
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()

/// One lab of tools/netlab (sender, router, receiver namespaces), torn down on deinit.
final class Lab {
    let name: String
    private let tool = packageRoot.appendingPathComponent("tools/netlab").path

    init(name: String, up arguments: [String]) throws {
        self.name = name
        let outcome = try run(tool, ["up", "--name", name] + arguments)
        guard outcome.status == 0 else {
            throw LabError("netlab up failed: \(outcome.stderr)")
        }
    }

    deinit { _ = try? run(tool, ["down", "--name", name]) }

    /// Changes impairments in place (`netlab set`).
    func set(_ arguments: [String]) throws {
        let outcome = try run(tool, ["set", "--name", name] + arguments)
        guard outcome.status == 0 else { throw LabError("netlab set failed: \(outcome.stderr)") }
    }

    /// The router's counters (`netlab counters --json`).
    func counters() throws -> [String: Int] {
        let outcome = try run(tool, ["counters", "--name", name, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(outcome.stdout.utf8)) as? [String: Int]
        return try #require(object)
    }

    /// Starts `arguments` inside a host (snd, rcv) of the lab.
    func spawn(_ host: String, _ executable: String, _ arguments: [String]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = ["netns", "exec", "sl-\(name)-\(host)", executable] + arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Runs `arguments` inside a host to completion.
    func exec(_ host: String, _ executable: String, _ arguments: [String]) throws -> Outcome {
        try run("/usr/sbin/ip", ["netns", "exec", "sl-\(name)-\(host)", executable] + arguments)
    }

    /// Once rcv listens on port 5004: `streamer send` in snd of `frames` frames (320x240, 1 Mbit/s,
    /// no congestion control, quiet) from port 6000 (its feedback socket 6001) to 10.77.2.2:5004,
    /// its stats written to `stats`, with `arguments` added: the stream of the retransmission
    /// interop tests.
    func spawnStreamToReceiver(_ binary: String, frames: Int, stats: URL, _ arguments: [String]) throws -> Process {
        try waitUntilBound("rcv", port: 5004)
        return try spawn("snd", binary, [
            "send", "--to", "10.77.2.2:5004", "--local-port", "6000", "--frames", "\(frames)", "--size", "320x240",
            "--bitrate", "1M", "--cc", "off", "--quiet", "--stats", stats.path,
        ] + arguments)
    }

    /// Waits until UDP `port` (IPv4, or IPv6 with `ipv6`) is bound inside `host`, up to 10 s.
    func waitUntilBound(_ host: String, port: UInt16, ipv6: Bool = false) throws {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let table = try exec(host, "/bin/cat", [ipv6 ? "/proc/net/udp6" : "/proc/net/udp"]).stdout
            if udpTableHasBinding(table, port: port) { return }
            Thread.sleep(forTimeInterval: 0.02)
        }
        throw LabError("nothing bound UDP port \(port) in \(host) within 10 s")
    }
}

/// One stream of the default sender into the default receiver across a lab: the stats of both
/// ends and the router's counters before and after.
struct LabStreamRun {
    var send: [String: Any]
    var recv: [String: Any]
    var before: [String: Int]
    var after: [String: Int]

    /// An integer stat of the sender or the receiver (-1 when absent).
    func int(_ object: [String: Any], _ path: String) -> Int { intField(object, path) ?? -1 }
    /// How much a router counter moved during the stream.
    func delta(_ key: String) -> Int { after[key, default: 0] - before[key, default: 0] }
    /// Media datagrams that reached the receiver's socket (copies included), by their ECN field.
    var datagramsAtReceiver: Int { ["ecn.notEct", "ecn.ect0", "ecn.ect1", "ecn.ce"].map { int(recv, $0) }.reduce(0, +) }
}

extension Lab {
    /// `streamer recv` (defaults: loss recovery, feedback) in rcv on port 5004, then `streamer
    /// send` in snd of `frames` frames of x265 at 320x240, 1 Mbit/s (defaults: congestion control
    /// on) with `sendArguments`; the receiver is stopped once the sender is done (`stopAfterSender`).
    func streamDefaultPair(frames: Int, _ sendArguments: [String] = []) throws -> LabStreamRun {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("lab-\(name)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let before = try counters()
        let receiver = try spawn("rcv", binary, [
            "recv", "--listen", "5004", "--duration", "120", "--quiet",
            "--stats", directory.appendingPathComponent("recv.json").path,
        ])
        try waitUntilBound("rcv", port: 5004)
        let sender = try spawn("snd", binary, [
            "send", "--to", "10.77.2.2:5004", "--frames", "\(frames)", "--size", "320x240", "--bitrate", "1M",
            "--quiet", "--stats", directory.appendingPathComponent("send.json").path,
        ] + sendArguments)
        let exits = stopAfterSender(sender, seconds: Double(frames) / 30 + 60, receiver: receiver, grace: 1)
        #expect(exits.sender == 0 && exits.receiver == 0)
        return LabStreamRun(send: try readJSON(directory.appendingPathComponent("send.json")),
                            recv: try readJSON(directory.appendingPathComponent("recv.json")),
                            before: before, after: try counters())
    }
}

struct LabError: Error, CustomStringConvertible {
    let description: String
    init(_ text: String) { description = text }
}

/// Waits for a process to exit within `seconds` (then kills it); returns its status.
@discardableResult
func waitForExit(_ process: Process, seconds: Double) -> Int32 {
    let deadline = Date().addingTimeInterval(seconds)
    while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
    if process.isRunning { process.terminate() }
    process.waitUntilExit()
    return process.terminationStatus
}

/// Waits for `sender` to exit (within `seconds`, then stops it), gives `receiver` `grace` more
/// seconds for what is still in flight and its playout delay, then stops it with SIGTERM (a clean
/// stop: its final stats written, exit 0). Returns both exit statuses. A receiver that stops
/// itself after a fixed `--duration` instead cuts off the stream's tail whenever a loaded machine
/// starts the sender late or runs it slower than real time (seen in a run beside two busy loops:
/// the last 20 packets of 780 missing), so a lab test's receiver gets a `--duration` only as a
/// cap far beyond the stream and is stopped by this.
@discardableResult
func stopAfterSender(_ sender: Process, seconds: Double, receiver: Process, grace: Double) -> (sender: Int32, receiver: Int32) {
    let senderStatus = waitForExit(sender, seconds: seconds)
    Thread.sleep(forTimeInterval: grace)
    return (senderStatus, waitForExit(receiver, seconds: 0))
}

/// Reads a JSON object from a file.
func readJSON(_ url: URL) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
}

/// `object["a"]["b"]` for "a.b".
func field(_ object: [String: Any], _ path: String) -> Any? {
    path.split(separator: ".").reduce(Optional(object) as Any?) { ($0 as? [String: Any])?[String($1)] }
}

func intField(_ object: [String: Any], _ path: String) -> Int? { field(object, path) as? Int }

/// The frames ffmpeg decodes from the H.265 file at `path`, damaged as it may be (its framemd5
/// lines: what it could not decode is not counted).
func ffmpegDecodedFrames(_ path: String) throws -> Int {
    let decoded = try run("/usr/bin/ffmpeg", ["-v", "quiet", "-i", path, "-f", "framemd5", "-"])
    return decoded.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.count
}

/// A fresh temporary directory.
func temporaryDirectory(_ prefix: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// `frames` of x265 at `bitrate` (30 frames per second), encoded as fast as it goes and
/// recorded as sent (`--record`), to a socket of this process on loopback that never reads:
/// a lab test that streams it at 30 fps offers the same load however busy the machine is (x265
/// live cannot keep real time on a saturated machine).
func recordClip(_ binary: String, into directory: URL, size: String, bitrate: String, frames: Int) throws -> URL {
    let sink = try #require(boundLoopbackUDPSocket())
    defer { close(sink.fd) }
    let clip = directory.appendingPathComponent("clip.hevc")
    let sent = try run(binary, ["send", "--to", "127.0.0.1:\(sink.port)", "--size", size,
                                "--bitrate", bitrate, "--frames", String(frames), "--fast", "--no-feedback", "--quiet",
                                "--record", clip.path])
    try #require(sent.status == 0, "recording the clip: \(sent.stderr)")
    return clip
}
