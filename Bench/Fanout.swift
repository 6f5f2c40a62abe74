import Foundation
import Glibc
import MediaFormats
import StreamEngine
import Synchronization
import UringIO

// bench fanout: one source, one engine (MediaSender), N unicast flows or one multicast group
// with K listening sockets, all on loopback; a child process counts every datagram each
// receiving socket gets. Sender CPU per receiver-datagram from getrusage (the engine thread,
// and the whole bench process: engine and feeder), user and system apart; io_uring_enter
// calls per datagram from the engine's counters; resident memory of the sender per flow.

/// Options of `bench fanout`.
struct FanoutOptions {
    var quick = false
    var flowCounts = [1, 10, 100, 255]
    var groupCounts = [1, 8, 32]
    var frameRate = 30
    var frameBytes = 12_000
    var seconds: Double?
    var repeats: Int?
    var out = "results/fanout"
    /// Flows expect RTCP feedback (their sockets, buffers and packet logs; the counter sends
    /// none, so rounds must stay under the unconfirmed bound: about 1.5 s of the stream).
    var feedback = false

    static let usage = """
        usage: bench fanout [--quick] [--flows LIST] [--group LIST] [--fps N] [--frame-bytes N]
                            [--seconds S] [--repeat N] [--out DIR] [--feedback]
          one synthetic HEVC source (one IDR, then P frames of --frame-bytes, default 12000, at --fps,
          default 30, in real time) handed to one MediaSender (no feedback, no congestion control,
          paced at 1.5 x the stream's bitrate per flow, MTU 1500) with N unicast flows to 127.0.0.1
          (--flows, default 1,10,100,255) and with one multicast flow to 239.255.70.1 on lo (TTL 0,
          loop on) heard by K sockets (--group, default 1,8,32; empty: none); a child process counts
          every datagram of every receiving socket. Reports sender CPU per receiver-datagram (engine
          thread and whole process, user and system apart; getrusage), io_uring_enter calls per
          datagram sent, and resident memory per flow; as a reference, one flow carrying the stream of
          the most flows (the same datagrams per second, to one receiver); one warm-up pass, then --repeat passes
          (default 3) interleaved, --seconds each round (default 2), medians. Writes fanout.json,
          fanout.csv and fanout.md into DIR (default results/fanout).
          --quick: flows 1,10,255 and group 1,8, 0.5 s, one pass and no warm-up, for CI
          --feedback: unicast flows expect RTCP feedback (none comes: keep --seconds at 1 or less,
          under the unconfirmed bound), to measure what a flow with feedback costs
        """

    static func parse(_ arguments: [String]) throws(BenchError) -> FanoutOptions {
        var options = FanoutOptions()
        var rest = BenchArguments(arguments)
        var flows: [Int]?, groups: [Int]?
        func value(_ flag: String) throws(BenchError) -> String { try rest.value(flag) }
        func number(_ flag: String, _ range: ClosedRange<Int>) throws(BenchError) -> Int { try rest.number(flag, range) }
        func list(_ flag: String, _ range: ClosedRange<Int>) throws(BenchError) -> [Int] {
            let text = try value(flag)
            var values: [Int] = []
            for item in text.split(separator: ",") {
                guard let value = Int(item), range.contains(value) else {
                    throw .usage("\(flag) \(text): expected whole numbers in \(range.lowerBound)...\(range.upperBound), comma-separated")
                }
                values.append(value)
            }
            return values
        }
        while let flag = rest.popFirst() {
            switch flag {
            case "--quick": options.quick = true
            case "--flows": flows = try list(flag, 1...255)
            case "--group": groups = try list(flag, 1...256)
            case "--fps": options.frameRate = try number(flag, 1...1000)
            case "--frame-bytes": options.frameBytes = try number(flag, 100...1_000_000)
            case "--seconds":
                let text = try value(flag)
                guard let seconds = Double(text), seconds >= 0.1, seconds <= 600 else {
                    throw .usage("--seconds \(text): expected a number of seconds in 0.1...600")
                }
                options.seconds = seconds
            case "--repeat": options.repeats = try number(flag, 1...100)
            case "--out": options.out = try value(flag)
            case "--feedback": options.feedback = true
            case "--help", "-h": throw .usage("help")
            default: throw .usage("unknown option \(flag) for fanout")
            }
        }
        if options.quick {
            options.flowCounts = [1, 10, 255]
            options.groupCounts = [1, 8]
        }
        if let flows { options.flowCounts = flows }
        if let groups { options.groupCounts = groups }
        if options.flowCounts.isEmpty && options.groupCounts.isEmpty { throw .usage("nothing to run: --flows and --group are empty") }
        return options
    }

    var roundSeconds: Double { seconds ?? (quick ? 0.5 : 2) }
    var repeatCount: Int { repeats ?? (quick ? 1 : 3) }
    var warmUp: Bool { !quick }
    var frameCount: Int { max(2, Int(roundSeconds * Double(frameRate))) }
    /// Bits per second of one flow's stream.
    var bitrate: Double { Double(frameBytes * 8 * frameRate) }
}

/// One case: N unicast flows, or one multicast flow heard by N sockets; or the reference, one
/// unicast flow carrying `rateScale` times the stream (the datagrams per second of that many flows).
struct FanoutCase: Hashable {
    var multicast: Bool
    var receivers: Int
    var rateScale = 1
    var flows: Int { multicast ? 1 : receivers }
    /// How the counter listens: unicast or multicast.
    var mode: String { multicast ? "multicast" : "unicast" }
    var name: String { rateScale > 1 ? "unicast-x\(rateScale)-rate" : mode }
}

/// One measured round of a case.
struct FanoutRound {
    var expectedPerReceiver: Int
    var counts: [Int]
    var sentPerFlow: [Int]
    var engine: ProcessCPUTime
    var process: ProcessCPUTime
    /// The engine thread's CPU in a run of the same flows with nothing to send (subtracted from `engine`).
    var setup: ProcessCPUTime
    var enterCalls: Int
    var mixedSubmissions: Int
    var residentBytes: Int
    var counterExit: Int32

    var receiverDatagrams: Int { counts.reduce(0, +) }
    var sent: Int { sentPerFlow.reduce(0, +) }
    /// Every receiving socket got every datagram of its flow, and each flow sent them all.
    var intact: Bool {
        counterExit == 0 && counts.allSatisfy { $0 == expectedPerReceiver } && sentPerFlow.allSatisfy { $0 == expectedPerReceiver }
    }
    func perReceiverDatagram(_ nanoseconds: Int64) -> Double { Double(nanoseconds) / Double(max(receiverDatagrams, 1)) }
}

/// The synthetic source's access units: an IDR first, then P frames (TRAIL_R), each one NAL
/// unit of `bytes` bytes of a fixed pattern.
func fanoutAccessUnit(index: Int, bytes: Int, frameRate: Int) -> AccessUnit {
    let keyframe = index == 0
    var nal = [UInt8](repeating: 0, count: bytes)
    nal[0] = keyframe ? 19 << 1 : 1 << 1  // IDR_W_RADL or TRAIL_R, layer 0
    nal[1] = 1  // TID 1
    for offset in 2..<bytes { nal[offset] = UInt8(truncatingIfNeeded: offset &* 31 &+ index) }
    return AccessUnit(nalUnits: [nal], timestamp: UInt32(truncatingIfNeeded: index * 90_000 / frameRate), isKeyframe: keyframe)
}

/// The process's resident set size in bytes (`VmRSS` in /proc/self/status).
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
    return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
}

/// The group of the multicast cases (administratively scoped, sent with TTL 0 on `lo`).
let fanoutGroup = "239.255.70.1"

/// Runs a sender's engine on a thread of its own and keeps that thread's CPU time.
final class FanoutEngine: Sendable {
    private let result = Mutex<(cpu: ProcessCPUTime, error: String?)?>(nil)
    private let done = DispatchSemaphore(value: 0)

    init(_ sender: MediaSender) {
        let thread = Thread { [self] in
            // The kernel brings a thread's own run time up to date at a tick or a switch, not
            // for getrusage: a yield first, or a reading can be 4 ms (a tick) old.
            sched_yield()
            let before = ProcessCPUTime.currentThread()
            var failure: String?
            do { try sender.run() } catch { failure = "\(error)" }
            sched_yield()
            let cpu = ProcessCPUTime.currentThread() - before
            self.result.withLock { $0 = (cpu, failure) }
            self.done.signal()
        }
        thread.start()
    }

    /// Waits for `run` to return: the engine thread's CPU time, or the error it threw.
    func wait() throws -> ProcessCPUTime {
        done.wait()
        let (cpu, error) = result.withLock { $0! }
        if let error { throw BenchError.runtime("the sender failed: \(error)") }
        return cpu
    }
}

/// One round: the counter child, the sender with its flows, the source in real time.
func runFanoutRound(_ benchCase: FanoutCase, options: FanoutOptions, bench: String, port: Int,
                    directory: String) throws -> FanoutRound {
    let units = (0..<options.frameCount).map {
        fanoutAccessUnit(index: $0, bytes: options.frameBytes * benchCase.rateScale, frameRate: options.frameRate)
    }
    let packetizer = try HEVCPacketizer(maxPayloadSize: 1500 - 28 - RTPHeader.fixedSize)
    let expected = units.reduce(0) { $0 + packetizer.plan($1).count }
    let output = directory + "/count-\(port).txt"
    let target = benchCase.multicast ? "\(fanoutGroup):\(port)" : "\(port)"
    let child = try spawnChild([bench, "fanout-count", benchCase.mode, target, "\(benchCase.receivers)", "\(expected)"],
                               stdoutPath: output)
    let readyBy = monotonicNanoseconds() + 10_000_000_000
    while !((try? String(contentsOfFile: output, encoding: .utf8))?.hasPrefix("ready") ?? false) {
        guard monotonicNanoseconds() < readyBy, reapChild(child, flags: WNOHANG) == nil else {
            kill(child, SIGKILL)
            throw BenchError.runtime("the fanout counter did not start (\(benchCase.name) \(benchCase.receivers))")
        }
        usleep(10_000)
    }
    let baseline = residentBytes()
    let loopback = try interfaceIndex("lo")
    let configs = try (0..<benchCase.flows).map { index in
        let destination = benchCase.multicast ? try SocketAddress.parse("\(fanoutGroup):\(port)")
            : try SocketAddress.parse("127.0.0.1:\(port + 2 * index)")
        var config = MediaSenderConfig(destination: destination)
        config.feedback = options.feedback && !benchCase.multicast
        config.mtu = .fixed(1500)
        config.paceBitsPerSecond = options.bitrate * Double(benchCase.rateScale) * 1.5
        config.multicastTTL = 0  // this host only
        config.multicastInterface = loopback
        return config
    }
    // The engine's fixed cost (ring, sockets, slots, their teardown): a run of the same flows
    // with nothing to send, subtracted from the round's.
    let idle = try MediaSender(flows: configs)
    idle.finish()
    let idleProcessBefore = ProcessCPUTime.now()
    let setup = try FanoutEngine(idle).wait()
    let setupProcess = ProcessCPUTime.now() - idleProcessBefore
    let sender = try MediaSender(flows: configs)
    let processBefore = ProcessCPUTime.now()
    let engine = FanoutEngine(sender)
    let interval = 1_000_000_000 / Int64(options.frameRate)
    var next = monotonicNanoseconds()
    var resident = 0
    for (index, unit) in units.enumerated() {
        sender.send(unit)
        if index == units.count / 2 { resident = residentBytes() - baseline }
        next += interval
        let wait = next - monotonicNanoseconds()
        if wait > 0 { usleep(UInt32(wait / 1000)) }
    }
    sender.finish()
    let engineCPU = try engine.wait() - setup
    let processCPU = ProcessCPUTime.now() - processBefore - setupProcess
    let stats = sender.allStats
    var counter: ChildRun?
    for _ in 0..<100 where counter == nil {  // it stops once every socket has all, or after 1.5 s of silence
        usleep(50_000)
        counter = reapChild(child, flags: WNOHANG)
    }
    if counter == nil {
        kill(child, SIGKILL)
        counter = waitChild(child)
    }
    let line = (try? String(contentsOfFile: output, encoding: .utf8))?.split(separator: "\n").last.map(String.init) ?? ""
    try? FileManager.default.removeItem(atPath: output)
    let fields = ControlMessage("result " + line).fields
    let counts = fields["counts"]?.split(separator: ",").compactMap { Int($0) } ?? []
    if let strays = fields["strays"].flatMap({ Int($0) }), strays > 0 {
        progress("\(benchCase.name) \(benchCase.receivers): \(strays) datagrams of another program on the counter's ports, not counted")
    }
    return FanoutRound(expectedPerReceiver: expected, counts: counts, sentPerFlow: stats.map(\.packetsSent),
                       engine: engineCPU, process: processCPU, setup: setup, enterCalls: stats.first?.enterCalls ?? 0,
                       mixedSubmissions: stats.first?.mixedSubmissions ?? 0, residentBytes: resident,
                       counterExit: counter?.status ?? -1)
}

/// `bench fanout-count unicast BASEPORT N EXPECTED` (N sockets on 127.0.0.1, ports BASEPORT,
/// BASEPORT+2, ...) or `bench fanout-count multicast GROUP:PORT N EXPECTED` (N sockets joined
/// to the group on lo): counts the stream's RTP datagrams each socket gets (`isFanoutDatagram`;
/// any other datagram is a stray); stops when every socket has EXPECTED, or 1.5 s after the last
/// datagram; prints `counts=C1,C2,... strays=S`.
func runFanoutCounter(_ arguments: [String]) throws {
    guard arguments.count == 4, ["unicast", "multicast"].contains(arguments[0]), let count = Int(arguments[2]),
          count > 0, let expected = Int(arguments[3]) else {
        throw BenchError.usage("usage: bench fanout-count unicast|multicast BASEPORT|GROUP:PORT N EXPECTED")
    }
    var sockets: [UDPSocket] = []
    if arguments[0] == "multicast" {
        let group = try SocketAddress.parse(arguments[1])
        let loopback = try interfaceIndex("lo")
        for _ in 0..<count {
            let socket = try UDPSocket(family: .ipv4)
            try socket.allowSharedPort()
            socket.setReceiveBufferSize(8 << 20)
            try socket.bind(group)
            try socket.joinMulticast(group: group, source: nil, interface: loopback)
            sockets.append(socket)
        }
    } else {
        guard let base = Int(arguments[1]), base > 0, base + 2 * count < 65_536 else {
            throw BenchError.usage("fanout-count: bad base port \(arguments[1])")
        }
        for index in 0..<count {
            let socket = try UDPSocket(family: .ipv4)
            socket.setReceiveBufferSize(4 << 20)
            try socket.bind(try SocketAddress.parse("127.0.0.1:\(base + 2 * index)"))
            sockets.append(socket)
        }
    }
    print("ready")
    fflush(nil)
    var counts = [Int](repeating: 0, count: count)
    var descriptors = sockets.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: 65_536, alignment: 16)
    defer { buffer.deallocate() }
    let started = monotonicNanoseconds()
    var lastSeen: Int64?
    var strays = 0
    while counts.contains(where: { $0 < expected }) {
        let now = monotonicNanoseconds()
        if let lastSeen, now - lastSeen > 1_500_000_000 { break }
        if lastSeen == nil && now - started > 60_000_000_000 { break }
        guard poll(&descriptors, nfds_t(descriptors.count), 100) > 0 else { continue }
        for index in descriptors.indices where descriptors[index].revents & Int16(POLLIN) != 0 {
            while true {
                let length = recv(descriptors[index].fd, buffer, 65_536, Int32(MSG_DONTWAIT))
                guard length >= 0 else { break }
                if isFanoutDatagram(UnsafeRawBufferPointer(start: buffer, count: length)) {
                    counts[index] += 1
                } else {
                    strays += 1  // another program's datagram to this port (a test run beside this one)
                }
                lastSeen = monotonicNanoseconds()
            }
        }
    }
    print("counts=" + counts.map(String.init).joined(separator: ",") + " strays=\(strays)")
}

/// Whether a datagram is one of the fan-out stream's: an RTP packet (version 2, a header and at
/// least the payload header) whose last payload bytes step by 31, as `fanoutAccessUnit` writes
/// its NAL units' bytes. Another program's datagram that reaches a counter's port is not counted.
func isFanoutDatagram(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard bytes.count >= RTPHeader.fixedSize + 2, bytes[0] >> 6 == 2 else { return false }
    // The NAL unit's bytes after the payload header and an FU header, at most 16 of them.
    let checked = min(16, bytes.count - RTPHeader.fixedSize - 3)
    guard checked >= 2 else { return true }
    for offset in (bytes.count - checked)..<(bytes.count - 1) where bytes[offset + 1] &- bytes[offset] != 31 {
        return false
    }
    return true
}

func runFanout(_ arguments: [String]) throws {
    let options = try FanoutOptions.parse(arguments)
    let bench = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
    var cases = options.flowCounts.map { FanoutCase(multicast: false, receivers: $0) }
        + options.groupCounts.map { FanoutCase(multicast: true, receivers: $0) }
    if let most = options.flowCounts.max(), most > 1, !options.quick {
        cases.append(FanoutCase(multicast: false, receivers: 1, rateScale: most))
    }
    let directory = NSTemporaryDirectory() + "bench-fanout-\(getpid())"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    // Below the ephemeral range (32768 on) and the engine's own RTP ports (40000-60000); moves
    // by 512 per round (255 flows take 510 ports).
    var port = 10_000 + Int(getpid() % 40) * 512
    var rounds: [FanoutCase: [FanoutRound]] = [:]
    let started = monotonicNanoseconds()
    for pass in (options.warmUp ? 0 : 1)...options.repeatCount {
        for benchCase in cases {
            var round: FanoutRound?
            for attempt in 1...3 where round == nil {  // a port of the block may be taken: the next block
                port = port + 1024 > 32_000 ? 10_000 : port + 512
                do {
                    round = try runFanoutRound(benchCase, options: options, bench: bench, port: port, directory: directory)
                } catch BenchError.runtime(let text) where text.hasPrefix("the fanout counter") && attempt < 3 {
                    progress(text + ", trying other ports")
                }
            }
            guard let round else { throw BenchError.runtime("no round of \(benchCase.name) \(benchCase.receivers)") }
            progress(String(format: "%@ %@ %d: %@, %.0f ns/receiver-datagram (engine), %d of %d datagrams at each receiver",
                            pass == 0 ? "warm-up" : "pass \(pass)", benchCase.name, benchCase.receivers,
                            round.intact ? "intact" : "NOT INTACT",
                            round.perReceiverDatagram(round.engine.userNanoseconds + round.engine.systemNanoseconds),
                            round.counts.min() ?? 0, round.expectedPerReceiver))
            if pass > 0 { rounds[benchCase, default: []].append(round) }
        }
    }
    progress(String(format: "done in %.1f s", Double(monotonicNanoseconds() - started) / 1e9))
    let report = renderFanout(cases: cases, rounds: rounds, options: options)
    print(report.table)
    try FileManager.default.createDirectory(atPath: options.out, withIntermediateDirectories: true)
    try JSONSerialization.data(withJSONObject: report.json, options: [.prettyPrinted, .sortedKeys])
        .write(to: URL(fileURLWithPath: options.out + "/fanout.json"))
    try report.csv.write(toFile: options.out + "/fanout.csv", atomically: true, encoding: .utf8)
    try report.table.write(toFile: options.out + "/fanout.md", atomically: true, encoding: .utf8)
    progress("wrote \(options.out)/fanout.json, fanout.csv and fanout.md")
    let failing = cases.filter { rounds[$0, default: []].contains { !$0.intact } }
    if !failing.isEmpty {
        throw BenchError.runtime("not every datagram reached every receiver in: "
                                 + failing.map { "\($0.name) \($0.receivers)" }.joined(separator: ", "))
    }
}

/// The table (markdown), the JSON document and the CSV of the rounds.
func renderFanout(cases: [FanoutCase], rounds: [FanoutCase: [FanoutRound]], options: FanoutOptions)
    -> (table: String, json: [String: Any], csv: String) {
    var table = """
        | case | receivers | flows | dg/receiver | engine user ns/rdg | engine sys ns/rdg | engine ns/rdg | × 1 receiver | marginal ns/rdg | engine ns/sent dg | process ns/rdg | enter/dg | mixed subm. | RSS KB/flow | setup µs/flow |
        |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|

        """
    var csv = "case,receivers,flows,pass,expected,delivered_min,sent,engine_user_ns,engine_sys_ns,process_user_ns,process_sys_ns,enter_calls,mixed_submissions,rss_bytes,intact\n"
    var rows: [[String: Any]] = []
    var single: [Bool: (perDatagram: Double, total: Double, delivered: Double)] = [:]
    for benchCase in cases {
        let mine = rounds[benchCase] ?? []
        guard !mine.isEmpty else { continue }
        let engineUser = median(mine.map { $0.perReceiverDatagram($0.engine.userNanoseconds) })
        let engineSystem = median(mine.map { $0.perReceiverDatagram($0.engine.systemNanoseconds) })
        let engine = median(mine.map { $0.perReceiverDatagram($0.engine.userNanoseconds + $0.engine.systemNanoseconds) })
        let processUser = median(mine.map { $0.perReceiverDatagram($0.process.userNanoseconds) })
        let processSystem = median(mine.map { $0.perReceiverDatagram($0.process.systemNanoseconds) })
        let enters = median(mine.map { Double($0.enterCalls) / Double(max($0.sent, 1)) })
        let resident = median(mine.map { Double($0.residentBytes) / Double(benchCase.flows) })
        let setup = median(mine.map { Double($0.setup.userNanoseconds + $0.setup.systemNanoseconds) / Double(benchCase.flows) })
        let totalEngine = median(mine.map { Double($0.engine.userNanoseconds + $0.engine.systemNanoseconds) })
        let delivered = median(mine.map { Double($0.receiverDatagrams) })
        if benchCase.receivers == 1 && benchCase.rateScale == 1 { single[benchCase.multicast] = (engine, totalEngine, delivered) }
        let ratio = benchCase.rateScale > 1 ? .nan : single[benchCase.multicast].map { engine / $0.perDatagram } ?? .nan
        // What each receiver-datagram beyond those of one receiver cost: the growth, without the
        // fixed cost per second of running an engine at all.
        // (Unicast only: a group's sender sends the same datagrams whatever the receivers.)
        var marginal = Double.nan
        let perSent = median(mine.map { Double($0.engine.userNanoseconds + $0.engine.systemNanoseconds) / Double(max($0.sent, 1)) })
        if !benchCase.multicast, let one = single[false], benchCase.receivers > 1, delivered > one.delivered {
            marginal = (totalEngine - one.total) / (delivered - one.delivered)
        }
        table += String(format: "| %@ | %d | %d | %d | %.0f | %.0f | %.0f | %@ | %@ | %.0f | %.0f | %.4f | %d | %.0f | %.1f |\n",
                        benchCase.name, benchCase.receivers, benchCase.flows, mine[0].expectedPerReceiver,
                        engineUser, engineSystem, engine, ratio.isFinite ? String(format: "%.2f", ratio) : "-",
                        marginal.isFinite ? String(format: "%.0f", marginal) : "-", perSent, processUser + processSystem, enters,
                        mine.map(\.mixedSubmissions).min() ?? 0, resident / 1024, setup / 1000)
        for (index, round) in mine.enumerated() {
            csv += "\(benchCase.name),\(benchCase.receivers),\(benchCase.flows),\(index + 1),\(round.expectedPerReceiver),"
                + "\(round.counts.min() ?? 0),\(round.sent),\(round.engine.userNanoseconds),\(round.engine.systemNanoseconds),"
                + "\(round.process.userNanoseconds),\(round.process.systemNanoseconds),\(round.enterCalls),"
                + "\(round.mixedSubmissions),\(round.residentBytes),\(round.intact)\n"
        }
        rows.append(["case": benchCase.name, "receivers": benchCase.receivers, "flows": benchCase.flows,
                     "expectedPerReceiver": mine[0].expectedPerReceiver,
                     "deliveredMin": mine.map { $0.counts.min() ?? 0 }, "intact": mine.map(\.intact),
                     "engineUserNsPerReceiverDatagram": engineUser, "engineSystemNsPerReceiverDatagram": engineSystem,
                     "engineNsPerReceiverDatagram": engine, "ratioToOneReceiver": ratio.isFinite ? ratio : NSNull(),
                     "marginalEngineNsPerReceiverDatagram": marginal.isFinite ? marginal : NSNull(),
                     "engineNsPerSentDatagram": perSent,
                     "rateScale": benchCase.rateScale,
                     "processUserNsPerReceiverDatagram": processUser, "processSystemNsPerReceiverDatagram": processSystem,
                     "enterCallsPerDatagram": enters, "mixedSubmissions": mine.map(\.mixedSubmissions),
                     "residentBytesPerFlow": resident, "setupNsPerFlow": setup])
    }
    let json: [String: Any] = [
        "command": CommandLine.arguments.joined(separator: " "), "frameRate": options.frameRate,
        "frameBytes": options.frameBytes, "seconds": options.roundSeconds, "passes": options.repeatCount,
        "warmUp": options.warmUp, "paceBitsPerSecondPerFlow": options.bitrate * 1.5, "feedback": options.feedback,
        "method": "one synthetic source handed in real time to one MediaSender (feedback as `feedback` says, no congestion control, "
            + "MTU 1500) with N unicast flows to 127.0.0.1 or one multicast flow (TTL 0, lo) heard by N sockets; "
            + "a child process counts each socket's datagrams; CPU is getrusage of the engine thread (RUSAGE_THREAD) "
            + "and of the bench process (engine + feeder) over the round, less the same in a run of the same flows with "
            + "nothing to send (setup and teardown: setupNsPerFlow), per datagram delivered to a receiver; "
            + "on one host the kernel's loopback delivery (for multicast: the copy per listening socket) is "
            + "charged to the sender's system time; medians over passes",
        "cases": rows,
    ]
    return (table, json, csv)
}
