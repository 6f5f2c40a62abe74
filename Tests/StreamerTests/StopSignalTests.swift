import Foundation
import Glibc
import Synchronization
import Testing
import TestSupport

let timeoutPath = "/usr/bin/timeout"
let tasksetPath = "/usr/bin/taskset"
let hasTimeoutAndTaskset = FileManager.default.isExecutableFile(atPath: timeoutPath)
    && FileManager.default.isExecutableFile(atPath: tasksetPath)

/// Runs `body(0..<count)` on `width` threads at once; returns the results in index order.
func inParallel<T: Sendable>(_ count: Int, width: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
    let next = Atomic<Int>(0)
    let results = Mutex<[Int: T]>([:])
    let done = DispatchGroup()
    for _ in 0..<min(width, count) {
        done.enter()
        Thread {
            while true {
                let index = next.add(1, ordering: .relaxed).oldValue
                if index >= count { break }
                let result = body(index)
                results.withLock { $0[index] = result }
            }
            done.leave()
        }.start()
    }
    done.wait()
    return results.withLock { all in (0..<count).map { all[$0]! } }
}

/// What one run left behind: its exit status, the stats file and stderr, and stray files.
struct StopRun: Sendable, CustomStringConvertible {
    var label: String
    var status: Int32
    /// The `--stats` file as text (nil: missing).
    var stats: String?
    var stderr: String
    /// Files in the run's directory other than the stats file (temporary names left over).
    var strays: [String]
    var description: String {
        "\(label): exit \(status), stats \(stats.map { "\($0.utf8.count) B" } ?? "missing"), strays \(strays), stderr \(stderr)"
    }

    /// The stats file parsed as one JSON object (nil: missing, cut short or not JSON).
    var statsObject: [String: Any]? {
        stats.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    /// The lines of stderr that are the run's summary (`streamer send: N frames, ...`).
    func summaryLines(_ command: String) -> Int {
        stderr.split(separator: "\n").filter {
            $0.hasPrefix("streamer \(command): ") && ($0.contains(" frames, ") || $0.contains(" complete and "))
        }.count
    }
}

/// Starts `arguments` with stdin, and stdout and stderr unless given, discarded.
func launch(_ executable: String, _ arguments: [String], stdout: Any? = FileHandle.nullDevice,
            stderr: Any? = FileHandle.nullDevice) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = stdout
    process.standardError = stderr
    process.standardInput = FileHandle.nullDevice
    try process.run()
    return process
}

/// Starts `arguments` with stdout discarded and stderr to `directory/stderr`.
func startLogged(_ executable: String, _ arguments: [String], directory: URL,
                 stdout: Any? = FileHandle.nullDevice) throws -> Process {
    let log = directory.appendingPathComponent("stderr")
    guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
        throw CocoaError(.fileWriteUnknown)
    }
    return try launch(executable, arguments, stdout: stdout, stderr: try FileHandle(forWritingTo: log))
}

/// Collects what a finished run left in `directory` (its stats file is `name`).
func collect(_ label: String, status: Int32, directory: URL, name: String) -> StopRun {
    let stats = try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
    let stderr = (try? String(contentsOf: directory.appendingPathComponent("stderr"), encoding: .utf8)) ?? ""
    let strays = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
        .filter { $0 != name && $0 != "stderr" }
    return StopRun(label: label, status: status, stats: stats, stderr: stderr, strays: strays)
}

/// Two bound UDP sockets (RTP and RTCP) on loopback that nobody reads: a receiver for a
/// sender under test that must not see "connection refused".
final class UDPSink: Sendable {
    let port: UInt16
    private let descriptors: [Int32]
    init() {
        while true {
            let port = nextPortPair()
            let fds = [port, port + 1].map { port -> Int32 in
                let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
                var address = loopbackIPv4(port: port)
                let bound = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                    }
                }
                if !bound { close(fd); return -1 }
                return fd
            }
            if !fds.contains(-1) {
                self.port = port
                descriptors = fds
                return
            }
            for fd in fds where fd >= 0 { close(fd) }
        }
    }
    deinit { for fd in descriptors { close(fd) } }
}

/// Issue 18: a stop request is one request however many copies of the signal arrive, and the
/// final stats are never lost. `timeout` signals its child and then the child's whole process
/// group, so the streamer gets the same signal twice, microseconds apart; pinned to one CPU
/// (`taskset -c 0`) the two used to be taken for a user's second Ctrl-C about half the time,
/// and the run exited at once without its stats.
@Suite(.enabled(if: uringEnabled, "io_uring is disabled here"),
       .enabled(if: hasTimeoutAndTaskset, "needs timeout (coreutils) and taskset (util-linux)"))
struct StopSignalTests {
    /// Runs per command and signal.
    static let runs = 20
    /// Runs at once (all pinned to CPU 0, as on a one-CPU machine).
    static let width = 4

    /// Every run of `command` stopped cleanly under `timeout`: exit 0 (124 from timeout, not
    /// 130), stats that parse with the command's role and `counter`, the summary said once, no
    /// temporary file left; and most runs got far enough to count something.
    static func expectCleanStops(_ results: [StopRun], command: String, counter: String) {
        for run in results {
            #expect(run.status == 0 || run.status == 124, "\(run)")
            let stats = run.statsObject
            #expect(stats?["role"] as? String == command, "\(run)")
            #expect(stats.flatMap { intField($0, counter) } != nil, "\(run)")
            #expect(run.summaryLines(command) == 1, "\(run)")
            #expect(run.strays.isEmpty, "\(run)")
        }
        let counts = results.compactMap { $0.statsObject.flatMap { intField($0, counter) } }
        #expect(counts.filter { $0 > 0 }.count > runs / 2, "most runs counted \(counter): \(counts)")
    }

    /// `timeout -s TERM|INT 2 streamer recv`, pinned to CPU 0, receiving a stream: every run
    /// exits 0 (124 from timeout), leaves a complete stats file (parses, role recv, packets
    /// received), says its summary once, and leaves no temporary file behind.
    @Test(arguments: ["TERM", "INT"])
    func recvUnderTimeoutKeepsItsStats(signal: String) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let results = inParallel(Self.runs, width: Self.width) { index -> StopRun in
            let label = "recv \(signal) #\(index)"
            guard let directory = try? temporaryDirectory("stop-recv") else { return StopRun.failed(label, "no directory") }
            defer { try? FileManager.default.removeItem(at: directory) }
            let port = nextPortPair()
            do {
                let receiver = try startLogged(tasksetPath, [
                    "-c", "0", timeoutPath, "-s", signal, "2", binary, "recv", "--listen", "127.0.0.1:\(port)", "--quiet",
                    "--stats", directory.appendingPathComponent("recv.json").path, "--stats-every", "0.05",
                ], directory: directory)
                // A stream to receive, once the receiver is bound (if it never binds, what it
                // left says why).
                var sender: Process?
                if (try? waitUntilBound(port: port)) != nil {
                    sender = try launch(binary, ["send", "--to", "127.0.0.1:\(port)", "--size", "320x240", "--bitrate", "500k",
                                                 "--duration", "5", "--quiet"])
                }
                let status = waitForExit(receiver, seconds: 30)
                if let sender {
                    if sender.isRunning { sender.terminate() }
                    sender.waitUntilExit()
                }
                return collect(label, status: status, directory: directory, name: "recv.json")
            } catch {
                return StopRun.failed(label, "\(error)")
            }
        }
        Self.expectCleanStops(results, command: "recv", counter: "packets.received")
    }

    /// `timeout -s TERM|INT 2 streamer send`, pinned to CPU 0, to a receiver that reads
    /// nothing: every run exits 0 (124), with complete stats (role send, frames sent), one
    /// summary and no temporary file left behind.
    @Test(arguments: ["TERM", "INT"])
    func sendUnderTimeoutKeepsItsStats(signal: String) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let results = inParallel(Self.runs, width: Self.width) { index -> StopRun in
            let label = "send \(signal) #\(index)"
            guard let directory = try? temporaryDirectory("stop-send") else { return StopRun.failed(label, "no directory") }
            defer { try? FileManager.default.removeItem(at: directory) }
            let sink = UDPSink()
            do {
                let sender = try startLogged(tasksetPath, [
                    "-c", "0", timeoutPath, "-s", signal, "2", binary, "send", "--to", "127.0.0.1:\(sink.port)",
                    "--size", "320x240", "--bitrate", "500k", "--quiet",
                    "--stats", directory.appendingPathComponent("send.json").path, "--stats-every", "0.05",
                ], directory: directory)
                let status = waitForExit(sender, seconds: 30)
                return withExtendedLifetime(sink) { collect(label, status: status, directory: directory, name: "send.json") }
            } catch {
                return StopRun.failed(label, "\(error)")
            }
        }
        Self.expectCleanStops(results, command: "send", counter: "frames.sent")
    }

    /// A sender whose clean stop takes long (a backlog paced out at 300 kbit/s) gets a second
    /// SIGINT 300 ms after the first: it exits at once with 130, its stats written and its
    /// summary said once.
    @Test func secondSignalStopsASenderAtOnceWithItsStats() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("stop-send-twice")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sink = UDPSink()
        let statsFile = directory.appendingPathComponent("send.json")
        let sender = try startLogged(tasksetPath, [
            "-c", "0", binary, "send", "--to", "127.0.0.1:\(sink.port)", "--size", "320x240", "--bitrate", "2M",
            "--pace", "300k", "--quiet", "--stats", statsFile.path, "--stats-every", "0.05",
        ], directory: directory)
        defer { if sender.isRunning { kill(sender.processIdentifier, SIGKILL) } }
        // Sending (and falling behind its pace: 2 Mbit/s of frames at 300 kbit/s) before the first signal.
        try waitForStats(statsFile, process: sender) { (intField($0, "bytes.sent") ?? 0) > 30_000 }
        kill(sender.processIdentifier, SIGINT)
        Thread.sleep(forTimeInterval: 0.3)
        try #require(sender.isRunning, "the first signal should leave a backlog to drain (the premise)")
        kill(sender.processIdentifier, SIGINT)
        let run = collect("send twice", status: waitForExit(sender, seconds: 5), directory: directory, name: "send.json")
        withExtendedLifetime(sink) {}
        #expect(run.status == 130, "\(run)")
        #expect(run.statsObject?["role"] as? String == "send", "\(run)")
        #expect((run.statsObject.flatMap { intField($0, "frames.sent") } ?? 0) > 0, "\(run)")
        #expect(run.summaryLines("send") == 1, "\(run)")
        #expect(run.strays.isEmpty, "\(run)")
    }

    /// A receiver whose clean stop cannot finish (its `--out -` pipe is full and nobody reads
    /// it) gets a second SIGTERM 300 ms after the first: it exits at once with 130, its stats
    /// written and its summary said once.
    @Test func secondSignalStopsABlockedReceiverAtOnceWithItsStats() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("stop-recv-twice")
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = nextPortPair()
        let statsFile = directory.appendingPathComponent("recv.json")
        let unread = Pipe()  // never read: the receiver's frame writes block once it is full
        _ = fcntl(unread.fileHandleForReading.fileDescriptor, 1031 /* F_SETPIPE_SZ */, 4096)
        let receiver = try startLogged(tasksetPath, [
            "-c", "0", binary, "recv", "--listen", "127.0.0.1:\(port)", "--quiet", "--out", "-",
            "--stats", statsFile.path, "--stats-every", "0.05",
        ], directory: directory, stdout: unread)
        defer { if receiver.isRunning { kill(receiver.processIdentifier, SIGKILL) } }
        try waitUntilBound(port: port)
        let sender = try launch(binary, ["send", "--to", "127.0.0.1:\(port)", "--size", "320x240", "--duration", "6", "--quiet"])
        defer { if sender.isRunning { sender.terminate() } }
        Thread.sleep(forTimeInterval: 1)  // a keyframe alone is more than the 4 KB pipe holds
        kill(receiver.processIdentifier, SIGTERM)
        Thread.sleep(forTimeInterval: 0.3)
        try #require(receiver.isRunning, "the receiver should be blocked in its write (the premise)")
        kill(receiver.processIdentifier, SIGTERM)
        let run = collect("recv twice", status: waitForExit(receiver, seconds: 5), directory: directory, name: "recv.json")
        withExtendedLifetime(unread) {}
        #expect(run.status == 130, "\(run)")
        #expect(run.statsObject?["role"] as? String == "recv", "\(run)")
        #expect(run.statsObject.flatMap { intField($0, "packets.received") } != nil, "\(run)")
        #expect(run.summaryLines("recv") == 1, "\(run)")
        #expect(run.strays.isEmpty, "\(run)")
    }

    /// `timeout -s TERM|INT 2 streamer demo`, pinned to CPU 0: the demo stops cleanly (exit 0,
    /// so 124 from timeout), prints its summary once, and every frame it sent arrived.
    @Test(arguments: ["TERM", "INT"])
    func demoUnderTimeoutStopsCleanly(signal: String) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let outcome = try run(tasksetPath, ["-c", "0", timeoutPath, "-s", signal, "2", binary, "demo", "--seconds", "30",
                                            "--size", "320x240"])
        #expect(outcome.status == 124, "stdout: \(outcome.stdout) stderr: \(outcome.stderr)")
        #expect(outcome.stdout.components(separatedBy: "sent:").count - 1 == 1, "\(outcome.stdout)")
        #expect(outcome.stdout.contains("demo: every frame arrived complete"), "\(outcome.stdout)")
    }
}

extension StopRun {
    /// A run that could not be started.
    static func failed(_ label: String, _ reason: String) -> StopRun {
        StopRun(label: label, status: -1, stats: nil, stderr: reason, strays: [])
    }
}

/// A stats file that never showed what a test waited for.
struct StatsNotReached: Error, CustomStringConvertible {
    var description: String
}

/// Waits (up to 20 s) until the stats file at `url` parses and satisfies `condition`.
func waitForStats(_ url: URL, process: Process, _ condition: ([String: Any]) -> Bool) throws {
    let deadline = Date().addingTimeInterval(20)
    while Date() < deadline && process.isRunning {
        if let data = try? Data(contentsOf: url),
           let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any], condition(object) { return }
        Thread.sleep(forTimeInterval: 0.05)
    }
    throw StatsNotReached(description: "stats at \(url.lastPathComponent) never met the condition")
}
