import Foundation
import Glibc
import MediaFormats
import StreamEngine
import UringIO

// bench peers: the same HEVC file at the same real-time frame rate, and as fast as each tool
// goes, through `streamer send`, GStreamer, FFmpeg and a floor sender (Bench/Floor/main.swift:
// one UDP GSO sendmsg per run of equal-size datagrams of a frame, sleep to the next frame or not
// at all), all to the same recvmmsg + GRO counter; whole-process CPU of each sender from outside
// (wait4), user and system apart. `--compare NAME=PATH` adds rows for another streamer binary.

/// Options of `bench peers`.
struct PeersOptions {
    var quick = false
    var frameRate = 240
    var frames: Int?
    var repeats: Int?
    var out = "results/peers"
    /// `--compare NAME=PATH`: further `streamer` binaries measured beside this build's.
    var compare: [(name: String, path: String)] = []
    /// `--no-fast`: real-time rounds only.
    var fast = true
    /// `--no-x265`: without the x265 live rows.
    var live = true
    /// `--pin`: senders on CPU 0, counters and receivers on CPU 1 (`taskset`), as issue 15 measured.
    var pin = false

    /// The CPUs of a pinned sender and of its counter or receiver, nil when not pinned.
    var cores: PeerCores? { pin ? PeerCores(sender: 0, receiver: 1) : nil }

    static let usage = """
        usage: bench peers [--quick] [--fps N] [--frames N] [--repeat N] [--no-fast] [--no-x265]
                           [--compare NAME=PATH]... [--pin] [--out DIR]
          encodes a 1280x720 HEVC test file (ffmpeg + libx265) and sends it at N frames per second in
          real time (default 240), and as fast as each tool goes, through a floor sender
          (bench-floor, beside bench), streamer send, GStreamer and FFmpeg (each skipped with a
          message when missing) to a recvmmsg + GRO counter; then each receiver fed by the floor
          sender, likewise (beside the counter, "by-hand": the counter rebuilding the frames as a
          receiver written by hand would, each payload copied once, no accounting); reports
          whole-process CPU per packet (wait4), packets per second, interleaved rounds after a
          warm-up, medians, and the ratio to the floor; writes peers.json, peers.csv and peers.md
          into DIR (default results/peers). --quick: 96 frames, one round, for CI. --no-fast: the
          real-time rounds only. --compare NAME=PATH: also a sender and a receiver row NAME running
          the streamer binary at PATH (e.g. a build of an older commit), in the same rounds.
          x265 live rows (unless --no-x265): streamer send encoding 1280x720 at 30 fps with x265 (a
          y4m file from ffmpeg, 300 frames, --quick 45; and its synthetic source), its CPU split into
          the encoder's and the rest, beside the floor sender sending the packets streamer sent.
          --pin: each sender on CPU 0, each counter and receiver on CPU 1 (taskset; the x265 rows
          are not pinned)
        """

    static func parse(_ arguments: [String]) throws(BenchError) -> PeersOptions {
        var options = PeersOptions()
        var rest = arguments[...]
        func number(_ flag: String, _ range: ClosedRange<Int>) throws(BenchError) -> Int {
            guard let text = rest.popFirst() else { throw .usage("\(flag) needs a value") }
            guard let value = Int(text), range.contains(value) else {
                throw .usage("\(flag) \(text): expected a whole number in \(range.lowerBound)...\(range.upperBound)")
            }
            return value
        }
        while let flag = rest.popFirst() {
            switch flag {
            case "--quick": options.quick = true
            case "--fps": options.frameRate = try number(flag, 1...1000)
            case "--frames": options.frames = try number(flag, 10...100_000)
            case "--repeat": options.repeats = try number(flag, 1...100)
            case "--out":
                guard let value = rest.popFirst() else { throw .usage("--out needs a value") }
                options.out = value
            case "--no-fast": options.fast = false
            case "--no-x265": options.live = false
            case "--pin":
                guard access(PeerCores.taskset, X_OK) == 0 else { throw .usage("--pin needs \(PeerCores.taskset) (util-linux)") }
                options.pin = true
            case "--compare":
                guard let value = rest.popFirst() else { throw .usage("--compare needs NAME=PATH") }
                let parts = value.split(separator: "=", maxSplits: 1).map(String.init)
                let reserved = ["floor", "by-hand", "streamer", "gstreamer", "ffmpeg"] + options.compare.map(\.name)
                guard parts.count == 2, !parts[0].isEmpty, !parts[0].contains(","), !reserved.contains(parts[0]) else {
                    throw .usage("--compare \(value): expected NAME=PATH with a new NAME (not \(reserved.joined(separator: ", ")))")
                }
                guard access(parts[1], X_OK) == 0 else { throw .usage("--compare \(value): \(parts[1]) is not an executable") }
                options.compare.append((parts[0], parts[1]))
            case "--help", "-h": throw .usage("help")
            default: throw .usage("unknown option \(flag) for peers")
            }
        }
        return options
    }

    var frameCount: Int { frames ?? (quick ? 96 : 1440) }
    var repeatCount: Int { repeats ?? (quick ? 1 : 3) }
    /// Frames of the x265 live rows (10 s at 30 fps; 1.5 s with --quick).
    var liveFrameCount: Int { quick ? 45 : 300 }
}

/// Finds an executable on PATH (or beside bench); nil when missing.
func findExecutable(_ name: String) -> String? {
    let beside = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent(name).path
    if name == "streamer" && access(beside, X_OK) == 0 { return beside }
    for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let path = "\(directory)/\(name)"
        if access(path, X_OK) == 0 { return path }
    }
    return nil
}

/// `bench-floor` (Bench/Floor/main.swift), the floor sender and counter, beside bench.
func floorExecutable() throws -> String {
    let path = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("bench-floor").path
    guard access(path, X_OK) == 0 else {
        throw BenchError.runtime("bench-floor (the floor sender and counter) is not beside bench: swift build --product bench-floor")
    }
    return path
}

/// A finished child: exit status and its CPU from wait4, in nanoseconds.
struct ChildRun {
    var status: Int32
    var userNanoseconds: Int64
    var systemNanoseconds: Int64
}

/// Where `bench peers --pin` runs its children: the sender on one CPU, the counter or receiver
/// on another.
struct PeerCores {
    var sender: Int
    var receiver: Int
    /// Runs a child on one CPU; it execs the child in its own process, so `wait4` of the
    /// spawned pid is the child's CPU (and taskset's own start, a few hundred microseconds).
    static let taskset = "/usr/bin/taskset"

    /// `argv` run on CPU `core`.
    static func pinned(_ argv: [String], to core: Int?) -> [String] {
        guard let core else { return argv }
        return [taskset, "-c", "\(core)"] + argv
    }
}

/// Spawns `argv` with stdout to `stdoutPath` (or /dev/null) and stderr to /dev/null.
func spawnChild(_ argv: [String], stdoutPath: String = "/dev/null") throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    var cArguments = argv.map { strdup($0) } + [nil]
    defer { cArguments.forEach { free($0) } }
    // Default dispositions and no blocked signals in the child, whatever bench inherited
    // (a test harness may block or ignore SIGINT and SIGTERM).
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var signals = sigset_t()
    sigemptyset(&signals)
    posix_spawnattr_setsigmask(&attributes, &signals)
    sigaddset(&signals, SIGINT)
    sigaddset(&signals, SIGTERM)
    posix_spawnattr_setsigdefault(&attributes, &signals)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var pid: pid_t = 0
    let result = posix_spawn(&pid, argv[0], &actions, &attributes, &cArguments, environ)
    guard result == 0 else { throw BenchError.runtime("cannot start \(argv[0]): \(String(cString: strerror(result)))") }
    return pid
}

/// Waits for a child and returns its status and CPU time.
func waitChild(_ pid: pid_t) -> ChildRun {
    var run: ChildRun?
    while run == nil { run = reapChild(pid, flags: 0) }
    return run!
}

/// The child's status and CPU time once it has ended; nil while it runs (with `WNOHANG`).
func reapChild(_ pid: pid_t, flags: Int32) -> ChildRun? {
    var status: Int32 = 0
    var usage = rusage()
    guard wait4(pid, &status, flags, &usage) == pid else { return nil }
    func nanoseconds(_ time: timeval) -> Int64 { Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_usec) * 1000 }
    let exited = status & 0x7f == 0
    return ChildRun(status: exited ? (status >> 8) & 0xff : 128 + (status & 0x7f),
                    userNanoseconds: nanoseconds(usage.ru_utime), systemNanoseconds: nanoseconds(usage.ru_stime))
}

/// The file's frames packetized once (RTP + HEVC payloads of at most 1400 bytes), written as
/// records the floor sender reads: per frame a UInt32 byte count, a UInt32 datagram count,
/// the datagram sizes (UInt16 each), then the datagrams back to back.
func writeFloorRecords(hevc: String, to path: String, frameRate: Int) throws -> (frames: Int, packets: Int) {
    guard let data = FileManager.default.contents(atPath: hevc) else { throw BenchError.runtime("cannot read \(hevc)") }
    var splitter = AnnexBAccessUnitSplitter()
    let units = splitter.append([UInt8](data)) + splitter.finish()
    let packetizer = try HEVCPacketizer(maxPayloadSize: 1400 - RTPHeader.fixedSize)
    var out = [UInt8]()
    var sequence: UInt16 = 0
    var packets = 0
    for (index, unit) in units.enumerated() {
        let timestamp = UInt32(truncatingIfNeeded: index * 90_000 / frameRate)
        var sizes = [UInt8]()
        var body = [UInt8]()
        let plan = packetizer.plan(unit)
        for payload in plan {
            let header = RTPHeader(marker: payload.marker, payloadType: RTPHeader.defaultHEVCPayloadType,
                                   sequenceNumber: sequence, timestamp: timestamp, ssrc: 0x5045_4552)
            sequence &+= 1
            let datagram = header.bytes + packetizer.bytes(of: payload, of: unit)
            sizes += [UInt8(datagram.count & 0xff), UInt8(datagram.count >> 8)]
            body += datagram
        }
        packets += plan.count
        for value in [UInt32(body.count), UInt32(plan.count)] {
            withUnsafeBytes(of: value.littleEndian) { out += $0 }
        }
        out += sizes + body
    }
    guard FileManager.default.createFile(atPath: path, contents: Data(out)) else {
        throw BenchError.runtime("cannot write \(path)")
    }
    return (units.count, packets)
}

/// One measured run of a sender or a receiver.
struct PeerRound {
    var sender: String
    /// "realtime" or "fast": the sender paced to the frame rate, or as fast as it goes.
    var mode = "realtime"
    var packets: Int
    var span: Int
    /// Packets sent: the file's packetization for the floor, the RTP sequence span the counter
    /// saw for the others (a loss at either end of the stream is not in it).
    var sent = 0
    var cpu: ChildRun
    /// From the sender's start to its exit.
    var wallNanoseconds: Int64 = 0
    /// From the counter's first receive to its last.
    var receiveNanoseconds: Int64 = 0
    /// Packets a `streamer recv` receiver reported received (its --stats), for the fast rounds.
    var receiverPackets = 0
    /// Packets delivered per second of the stream at the counter (start-up not included).
    var packetsPerSecond: Double { Double(packets) * 1e9 / Double(max(receiveNanoseconds, 1)) }
    var nanosecondsPerPacket: Double { Double(cpu.userNanoseconds + cpu.systemNanoseconds) / Double(max(packets, 1)) }
}

/// A sender of `bench peers`: its row name, its command for a counter's port, and whether it
/// sends the floor's own packetization (so the count of packets sent is known exactly).
struct PeerSender {
    var name: String
    var mode: String
    var argv: (Int) -> [String]
    var exact: Bool
}

/// The senders of one mode: "realtime" (paced to the frame rate as each tool paces a file) or
/// "fast" (as fast as each tool goes: the floor without sleeping, GStreamer `sync=false`,
/// FFmpeg without `-re`, `streamer send --fast`, unpaced; a --compare binary without `--fast`
/// is a real-time row only).
func peerSenders(mode: String, floor: String, records: String, hevc: String, ffmpeg: String,
                 streamers: [(name: String, path: String)], options: PeersOptions) -> [PeerSender] {
    let fast = mode == "fast"
    let fps = "\(options.frameRate)"
    var senders = [PeerSender(name: "floor", mode: mode, argv: { [floor, "send", records, "\($0)", fast ? "0" : fps] },
                              exact: true)]
    for streamer in streamers where !fast || supportsFast(streamer.path) {
        senders.append(PeerSender(name: streamer.name, mode: mode, argv: {
            [streamer.path, "send", "--to", "127.0.0.1:\($0)", "--source", hevc, "--fps", fps, "--no-feedback", "--cc", "off"]
                + (fast ? ["--fast"] : ["--pace", "2G"]) + ["--mtu", "1428", "--quiet"]
        }, exact: false))
    }
    if let gst = findExecutable("gst-launch-1.0") {
        senders.append(PeerSender(name: "gstreamer", mode: mode, argv: {
            [gst, "-q", "filesrc", "location=\(hevc)", "!", "h265parse", "!", "rtph265pay", "mtu=1400", "!", "udpsink",
             "host=127.0.0.1", "port=\($0)", "sync=\(fast ? "false" : "true")"]
        }, exact: false))
    }
    senders.append(PeerSender(name: "ffmpeg", mode: mode, argv: {
        [ffmpeg, "-hide_banner", "-loglevel", "error"] + (fast ? [] : ["-re"])
            + ["-framerate", fps, "-i", hevc, "-c", "copy", "-f", "rtp", "rtp://127.0.0.1:\($0)?pkt_size=1400"]
    }, exact: false))
    return senders
}

/// True when the streamer at `path` has `send --fast` (its `send --help` says so).
func supportsFast(_ path: String) -> Bool {
    let help = FileManager.default.temporaryDirectory.appendingPathComponent("bench-peers-help-\(getpid())").path
    defer { try? FileManager.default.removeItem(atPath: help) }
    guard let child = try? spawnChild([path, "send", "--help"], stdoutPath: help), waitChild(child).status == 0 else { return false }
    return (try? String(contentsOfFile: help, encoding: .utf8))?.contains("--fast") == true
}

/// Starts a counter on the next port, runs `sender` to it and returns the measured round.
func measureSender(_ sender: PeerSender, floor: String, packets: Int, directory: String, port: inout Int,
                   cores: PeerCores? = nil) throws -> PeerRound {
    port += 2
    let output = directory + "/count-\(port).txt"
    let counter = try spawnChild(PeerCores.pinned([floor, "count", "\(port)", "\(sender.exact ? packets : 0)"],
                                                  to: cores?.receiver), stdoutPath: output)
    var ready = false
    for _ in 0..<500 where !ready {
        usleep(10_000)
        ready = (try? String(contentsOfFile: output, encoding: .utf8))?.hasPrefix("ready") == true
    }
    let started = monotonicNanoseconds()
    let child = waitChild(try spawnChild(PeerCores.pinned(sender.argv(port), to: cores?.sender)))
    let wall = monotonicNanoseconds() - started
    _ = waitChild(counter)
    let fields = ControlMessage((try? String(contentsOfFile: output, encoding: .utf8))?
        .split(separator: "\n").last.map { "result " + $0 } ?? "")
    let span = fields.int("span")
    return PeerRound(sender: sender.name, mode: sender.mode, packets: fields.int("packets"), span: span,
                     sent: sender.exact ? packets : span, cpu: child, wallNanoseconds: wall,
                     receiveNanoseconds: Int64(fields.int("duration")))
}

func runPeers(_ arguments: [String]) throws {
    let options = try PeersOptions.parse(arguments)
    guard let ffmpeg = findExecutable("ffmpeg") else {
        throw BenchError.runtime("peers needs ffmpeg with libx265 to make the test file")
    }
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bench-peers-\(getpid())").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let hevc = directory + "/test.hevc", records = directory + "/test.rtp"
    progress("encoding \(options.frameCount) frames of 1280x720 HEVC at \(options.frameRate) fps")
    let encoder = waitChild(try spawnChild([ffmpeg, "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                                            "testsrc2=size=1280x720:rate=\(options.frameRate)",
                                            "-frames:v", "\(options.frameCount)", "-c:v", "libx265", "-preset",
                                            "ultrafast", "-b:v", "\(options.frameRate / 6)M", "-x265-params",
                                            "log-level=error", "-f", "hevc", hevc]))
    guard encoder.status == 0 else { throw BenchError.runtime("ffmpeg could not encode the test file (libx265?)") }
    let (frames, packets) = try writeFloorRecords(hevc: hevc, to: records, frameRate: options.frameRate)
    progress("\(frames) frames, \(packets) RTP packets of at most 1400 bytes")
    let floor = try floorExecutable()
    let loadBefore = loadAverage()
    var streamers = options.compare
    if let streamer = findExecutable("streamer") { streamers.insert(("streamer", streamer), at: 0) } else {
        progress("streamer not found: skipped")
    }
    if findExecutable("gst-launch-1.0") == nil { progress("gst-launch-1.0 not found: skipped") }
    for streamer in streamers where options.fast && !supportsFast(streamer.path) {
        progress("fast rounds: \(streamer.name) (\(streamer.path)) has no streamer send --fast: no fast row for it")
    }
    let modes = options.fast ? ["realtime", "fast"] : ["realtime"]
    let senders = modes.flatMap { peerSenders(mode: $0, floor: floor, records: records, hevc: hevc, ffmpeg: ffmpeg,
                                              streamers: streamers, options: options) }

    var rounds: [PeerRound] = []
    var port = 20_000 + Int(getpid() % 20_000)
    for round in 0...options.repeatCount {  // round 0 warms up
        for sender in senders {
            let result = try measureSender(sender, floor: floor, packets: packets, directory: directory, port: &port,
                                           cores: options.cores)
            progress(String(format: "round %d %@ %@: %d of %d packets, exit %d, %.2f µs/packet, %.0f packets/s",
                            round, sender.name, sender.mode, result.packets, result.sent, result.cpu.status,
                            result.nanosecondsPerPacket / 1000, result.packetsPerSecond))
            if round > 0 { rounds.append(result) }
        }
    }
    var table = "| sender | mode | sent | delivered | user µs/pkt | sys µs/pkt | CPU µs/pkt | × floor | × floor by round | packets/s |\n"
        + "|---|---|---|---|---|---|---|---|---|---|\n"
    var csv = "sender,mode,round,packets,span,exit,userNs,systemNs,nsPerPacket,wallNs,receiveNs\n"
    var json: [[String: Any]] = []
    for mode in modes {
        let floorRounds = rounds.filter { $0.sender == "floor" && $0.mode == mode }
        let floor = median(floorRounds.map(\.nanosecondsPerPacket))
        for sender in senders where sender.mode == mode {
            let mine = rounds.filter { $0.sender == sender.name && $0.mode == mode }
            let byRound = ratiosByRound(mine, floorRounds)
            let user = median(mine.map { Double($0.cpu.userNanoseconds) / Double(max($0.packets, 1)) })
            let system = median(mine.map { Double($0.cpu.systemNanoseconds) / Double(max($0.packets, 1)) })
            let total = median(mine.map(\.nanosecondsPerPacket))
            let rate = median(mine.map(\.packetsPerSecond))
            table += String(format: "| %@ | %@ | %d | %d | %.2f | %.2f | %.2f | %.2f | %@ | %.0f |\n", sender.name, mode,
                            mine.map(\.sent).min() ?? 0, mine.map(\.packets).min() ?? 0, user / 1000, system / 1000,
                            total / 1000, total / floor, describeRatios(byRound), rate)
            csv += csvRows(sender.name, mode, mine)
            json.append(["sender": sender.name, "mode": mode, "delivered": mine.map(\.packets), "sent": mine.map(\.sent),
                         "exit": mine.map(\.cpu.status), "userNsPerPacket": user, "systemNsPerPacket": system,
                         "nsPerPacket": total, "ratioToFloor": total / floor, "ratioToFloorByRound": byRound,
                         "packetsPerSecond": rate])
        }
    }
    var live = LiveReport()
    if options.live, let streamer = streamers.first(where: { $0.name == "streamer" }) {
        live = try measureLive(floor: floor, streamer: streamer.path, ffmpeg: ffmpeg, frames: options.liveFrameCount,
                               options: options, directory: directory, port: &port)
    }
    let receivers = try measureReceivers(floor: floor, ffmpeg: ffmpeg, records: records, frames: frames,
                                         packets: packets, streamers: streamers, modes: modes, options: options,
                                         directory: directory, port: &port)
    var receiverTable = "| receiver | mode | delivered | user µs/pkt | sys µs/pkt | CPU µs/pkt | × floor | × floor by round |\n"
        + "|---|---|---|---|---|---|---|---|\n"
    var receiverJSON: [[String: Any]] = []
    let streamerNames = Set(streamers.map(\.name))
    for mode in modes {
        let floorReceiverRounds = receivers.filter { $0.sender == "floor" && $0.mode == mode }
        let floorReceiver = median(floorReceiverRounds.map(\.nanosecondsPerPacket))
        for name in ["floor", "by-hand"] + streamers.map(\.name) + ["gstreamer", "ffmpeg"] {
            let mine = receivers.filter { $0.sender == name && $0.mode == mode }
            let rebuilds = name == "by-hand" || streamerNames.contains(name)
            guard !mine.isEmpty else { continue }
            let byRound = ratiosByRound(mine, floorReceiverRounds)
            let user = median(mine.map { Double($0.cpu.userNanoseconds) / Double(packets) })
            let system = median(mine.map { Double($0.cpu.systemNanoseconds) / Double(packets) })
            let total = median(mine.map(\.nanosecondsPerPacket))
            let delivered = name == "floor" ? "\(mine.map(\.packets).min() ?? 0) packets"
                : rebuilds
                    ? "\(mine.map(\.span).min() ?? 0) frames" + (mode == "fast" ? ", \(mine.map(\.receiverPackets).min() ?? 0) packets" : "")
                    : "-"
            receiverTable += String(format: "| %@ | %@ | %@ | %.2f | %.2f | %.2f | %.2f | %@ |\n", name, mode, delivered, user / 1000,
                                    system / 1000, total / 1000, total / floorReceiver, describeRatios(byRound))
            csv += csvRows("recv-\(name)", mode, mine)
            var row: [String: Any] = ["receiver": name, "mode": mode, "userNsPerPacket": user, "systemNsPerPacket": system,
                                      "nsPerPacket": total, "ratioToFloor": total / floorReceiver,
                                      "ratioToFloorByRound": byRound,
                                      "exit": mine.map(\.cpu.status)]
            if name == "floor" { row["delivered"] = mine.map(\.packets) }
            if rebuilds {
                row["decodedFrames"] = mine.map(\.span)
                row["receivedPackets"] = mine.map(\.receiverPackets)
            }
            receiverJSON.append(row)
        }
    }
    let loadAfter = loadAverage()
    let senderTitle = "Senders: \(frames) frames, \(packets) packets (floor packetization) at \(options.frameRate) fps in real time"
        + (options.fast ? " and as fast as each goes" : "")
        + "; whole-process CPU per delivered packet, medians of \(options.repeatCount) interleaved rounds"
        + " (× floor by round: the median of each round's ratio to that round's floor, and their range)"
    let receiverTitle = "Receivers fed by the floor sender at \(options.frameRate) fps"
        + (options.fast ? " and as fast as it goes (the receiver may miss packets: see delivered)" : "")
        + ": whole-process CPU per sent packet (the floor: per counted packet), medians"
    let loadLine = "Load average (1, 5, 15 min, /proc/loadavg) at the start: \(loadBefore); at the end: \(loadAfter)"
        + (options.pin ? ". Pinned (--pin): senders on CPU 0, counters and receivers on CPU 1" : ". Not pinned")
    print(loadLine)
    print(senderTitle)
    print(table)
    print(receiverTitle)
    print(receiverTable)
    if !live.json.isEmpty {
        print(live.title)
        print(live.table)
    }
    try FileManager.default.createDirectory(atPath: options.out, withIntermediateDirectories: true)
    let document: [String: Any] = ["command": CommandLine.arguments.joined(separator: " "), "frames": frames,
                                   "packets": packets, "frameRate": options.frameRate, "senders": json,
                                   "receivers": receiverJSON, "x265Live": live.json, "loadBefore": loadBefore, "loadAfter": loadAfter, "pinned": options.pin,
                                   "compare": Dictionary(uniqueKeysWithValues: options.compare.map { ($0.name, $0.path) })]
    try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys])
        .write(to: URL(fileURLWithPath: options.out + "/peers.json"))
    try csv.write(toFile: options.out + "/peers.csv", atomically: true, encoding: .utf8)
    if !live.json.isEmpty { try live.csv.write(toFile: options.out + "/peers-x265.csv", atomically: true, encoding: .utf8) }
    try (loadLine + "\n\n" + senderTitle + "\n\n" + table + "\n" + receiverTitle + "\n\n" + receiverTable
         + (live.json.isEmpty ? "" : "\n" + live.title + "\n\n" + live.table))
        .write(toFile: options.out + "/peers.md", atomically: true, encoding: .utf8)
    progress("wrote \(options.out)/peers.json, peers.csv\(live.json.isEmpty ? "" : ", peers-x265.csv") and peers.md")
}

/// The first three fields of /proc/loadavg (1, 5 and 15 minute load averages), or "?".
func loadAverage() -> String {
    guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "?" }
    return text.split(separator: " ").prefix(3).joined(separator: " ")
}

/// `peers.csv`'s lines of one row: one per round, numbered from 1.
func csvRows(_ name: String, _ mode: String, _ rounds: [PeerRound]) -> String {
    rounds.enumerated().map { index, round in
        "\(name),\(mode),\(index + 1),\(round.packets),\(round.span),\(round.cpu.status),"
            + "\(round.cpu.userNanoseconds),\(round.cpu.systemNanoseconds),\(Int(round.nanosecondsPerPacket)),"
            + "\(round.wallNanoseconds),\(round.receiveNanoseconds)\n"
    }.joined()
}

/// Each round's ratio of a row's CPU per packet to the floor's in the same round (rounds run
/// their rows one after another, so a round's pair shares the machine's state of that moment).
func ratiosByRound(_ rows: [PeerRound], _ floor: [PeerRound]) -> [Double] {
    zip(rows, floor).map { $0.nanosecondsPerPacket / max($1.nanosecondsPerPacket, 1) }
}

/// The median of the per-round ratios, then their range: "1.12 (0.93 – 1.46)".
func describeRatios(_ ratios: [Double]) -> String {
    guard let low = ratios.min(), let high = ratios.max() else { return "-" }
    return String(format: "%.2f (%.2f – %.2f)", median(ratios), low, high)
}

/// Receiver rounds: each receiver fed by the floor sender in each mode (real time, or without
/// sleeping), interleaved after a warm-up round; `packets` is what the floor counter counted,
/// `span` the frames `streamer recv` decoded, `receiverPackets` the packets it received.
func measureReceivers(floor: String, ffmpeg: String, records: String, frames: Int, packets: Int,
                      streamers: [(name: String, path: String)], modes: [String], options: PeersOptions,
                      directory: String, port: inout Int) throws -> [PeerRound] {
    typealias Command = (Int, String) -> [String]
    let floorCommand: Command = { port, _ in [floor, "count", "\(port)", "\(packets)"] }
    // The floor counts; "by-hand" also rebuilds the frames as a receiver written by hand would
    // (bench-floor count --rebuild: each payload copied once, no accounting; Bench/Floor/FrameRebuilder.swift).
    var receivers: [(name: String, argv: Command)] = [("floor", floorCommand),
                                                      ("by-hand", { floorCommand($0, $1) + ["--rebuild"] })]
    for streamer in streamers {
        receivers.append((streamer.name, { port, base in
            [streamer.path, "recv", "--listen", "127.0.0.1:\(port)", "--frames", "\(frames)", "--no-feedback", "--quiet",
             "--stats", base + ".json"]
        }))
    }
    if let gst = findExecutable("gst-launch-1.0") {
        receivers.append(("gstreamer", { port, _ in [gst, "-q", "udpsrc", "address=127.0.0.1", "port=\(port)", "buffer-size=67108864",
                                          "caps=application/x-rtp,media=video,clock-rate=90000,encoding-name=H265,payload=96",
                                          "!", "rtph265depay", "!", "fakesink"] }))
    }
    receivers.append(("ffmpeg", { _, base in [ffmpeg, "-hide_banner", "-loglevel", "error", "-protocol_whitelist", "file,udp,rtp",
                                   "-i", base + ".sdp", "-c", "copy", "-f", "null", "-"] }))
    let streamerNames = Set(streamers.map(\.name))
    var rounds: [PeerRound] = []
    for round in 0...options.repeatCount {
        for mode in modes {
            for receiver in receivers {
                port += 2
                let output = directory + "/recv-\(port)"
                let sdp = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=peers\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
                    + "m=video \(port) RTP/AVP 96\r\na=rtpmap:96 H265/90000\r\n"
                try sdp.write(toFile: output + ".sdp", atomically: true, encoding: .utf8)
                let child = try spawnChild(PeerCores.pinned(receiver.argv(port, output), to: options.cores?.receiver),
                                           stdoutPath: output + ".txt")
                usleep(700_000)  // the receiver's start-up
                let fps = mode == "fast" ? 0 : options.frameRate
                let sender = waitChild(try spawnChild(PeerCores.pinned([floor, "send", records, "\(port)", "\(fps)"],
                                                                      to: options.cores?.sender)))
                var result: ChildRun?
                for _ in 0..<30 where result == nil {  // the floor counter and streamer stop by themselves
                    usleep(100_000)
                    result = reapChild(child, flags: WNOHANG)
                }
                // GStreamer and FFmpeg run until stopped: SIGTERM (a SIGINT may be ignored when bench
                // runs under a test harness), a second SIGTERM, SIGKILL if that does not end it
                // within 2 s. FFmpeg takes its first signal as a request to stop between packets,
                // and none come once the stream has ended; its second interrupts the blocked read
                // (without it, every FFmpeg receiver run ended by SIGKILL, 2 s later).
                for signal in [SIGTERM, SIGTERM, SIGKILL] where result == nil {
                    kill(child, signal)
                    for _ in 0..<20 where result == nil {
                        usleep(100_000)
                        result = reapChild(child, flags: WNOHANG)
                    }
                }
                var counted = 0, decoded = 0, received = 0
                if receiver.name == "floor" || receiver.name == "by-hand" {
                    let line = ControlMessage("result " + ((try? String(contentsOfFile: output + ".txt", encoding: .utf8))?
                        .split(separator: "\n").last.map(String.init) ?? ""))
                    counted = line.int("packets")
                    (decoded, received) = (line.int("frames"), counted)
                }
                if streamerNames.contains(receiver.name), let data = FileManager.default.contents(atPath: output + ".json"),
                   let stats = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
                    decoded = (stats["frames"] as? [String: Any])?["complete"] as? Int ?? 0
                    received = (stats["packets"] as? [String: Any])?["received"] as? Int ?? 0
                }
                var measured = PeerRound(sender: receiver.name, mode: mode, packets: receiver.name == "floor" ? counted : packets,
                                         span: decoded, cpu: result ?? waitChild(child))
                measured.receiverPackets = received
                let rebuilds = receiver.name == "by-hand" || streamerNames.contains(receiver.name)
                progress(String(format: "round %d receiver %@ %@: exit %d, sender exit %d, %.2f µs/packet%@", round,
                                receiver.name, mode, measured.cpu.status, sender.status, measured.nanosecondsPerPacket / 1000,
                                receiver.name == "floor" ? " (\(counted) packets)" : rebuilds ? " (\(decoded) frames)" : ""))
                if round > 0 { rounds.append(measured) }
            }
        }
    }
    return rounds
}
