import Foundation
import Glibc
import UringIO

// bench: CPU and system calls per datagram of each send path against plain sendto,
// the receiver in a separate process (see README.md, section bench).

signal(SIGPIPE, SIG_IGN)

/// Says `error` on stderr and exits: 2 for a usage error, 1 otherwise.
func exitReporting(_ error: Error, prefix: String) -> Never {
    FileHandle.standardError.write(Data("\(prefix): \(error)\n".utf8))
    if case BenchError.usage = error { exit(2) }
    exit(1)
}

/// The subcommands besides send/recv: how each runs and its usage text.
let subcommands: [String: (run: ([String]) throws -> Void, usage: String)] = [
    "encoder-rate": (runEncoderRate, EncoderRateOptions.usage),
    "fanout": (runFanout, FanoutOptions.usage),
    "fanout-count": (runFanoutCounter, FanoutOptions.usage),
    "peers": (runPeers, PeersOptions.usage),
]
if let name = CommandLine.arguments.dropFirst().first, let command = subcommands[name] {
    do {
        try command.run(Array(CommandLine.arguments.dropFirst(2)))
        exit(0)
    } catch BenchError.usage("help") {
        print(command.usage)
        exit(0)
    } catch {
        exitReporting(error, prefix: "bench \(name)")
    }
}

let options: BenchOptions
do {
    options = try BenchOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    if case .usage(let text) = error, text == "help" {
        print(BenchOptions.usage)
        exit(0)
    }
    FileHandle.standardError.write(Data("bench: \(error)\n".utf8))
    exit(2)
}

/// Opens a TCP listener on `address`, accepts one connection and returns it.
func acceptControlConnection(on address: SocketAddress) throws -> Int32 {
    let listener = socket(address.family == .ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard listener >= 0 else { throw BenchError.runtime("cannot open the control socket: \(String(cString: strerror(errno)))") }
    defer { close(listener) }
    var one: Int32 = 1
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    guard address.withSockAddr({ bind(listener, $0, $1) }) == 0, listen(listener, 1) == 0 else {
        throw BenchError.runtime("cannot listen for the control connection on TCP \(address): \(String(cString: strerror(errno)))")
    }
    progress("waiting for bench send on TCP \(address)")
    let connection = accept(listener, nil, nil)
    guard connection >= 0 else { throw BenchError.runtime("accept failed: \(String(cString: strerror(errno)))") }
    return connection
}

/// Connects the control channel to a remote `bench recv`.
func connectControl(to address: SocketAddress) throws -> Int32 {
    let connection = socket(address.family == .ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard connection >= 0, address.withSockAddr({ connect(connection, $0, $1) }) == 0 else {
        throw BenchError.runtime("cannot connect the control channel to TCP \(address): \(String(cString: strerror(errno))) (is bench recv running there?)")
    }
    var one: Int32 = 1
    setsockopt(connection, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    return connection
}

func runReceiver() throws {
    let address = try SocketAddress.parse(options.listen!, defaultHost: "0.0.0.0")
    let readFD: Int32
    let writeFD: Int32
    if options.control == "stdio" {
        readFD = 0
        writeFD = 1
    } else {
        guard address.port != 0 else { throw BenchError.usage("--listen needs a port for a TCP control channel") }
        let connection = try acceptControlConnection(on: address)
        readFD = connection
        writeFD = connection
    }
    let receiver = try BenchReceiver(listen: address, paths: options.receivePaths, batch: options.batch,
                                     control: ControlChannel(readFD: readFD, writeFD: writeFD),
                                     receiveBuffer: options.receiveBuffer)
    try receiver.serve(commandReader: ControlChannel(readFD: readFD, writeFD: writeFD))
}

/// The cases to run: the main group, then the sweeps.
func plan(served: [ReceivePath]) -> [(label: String, cases: [BenchCase], count: Int, repeats: Int)] {
    var sendPaths = options.sendPaths.filter { !$0.isStream }
    if !sendPaths.contains(.sendto) { sendPaths.insert(.sendto, at: 0) }  // the reference of every ratio
    let receivePaths = options.receivePaths.filter { served.contains($0) && $0 != .uringTimestamps }
    var groups: [(label: String, cases: [BenchCase], count: Int, repeats: Int)] = []
    let main = sendPaths.flatMap { send in
        receivePaths.map { BenchCase(group: "main", send: send, receive: $0, size: options.size, batch: options.batch) }
    }
    groups.append(("main", main, options.roundCount, options.repeatCount))
    let sweepReceivers = receivePaths.filter { $0 == .recvfrom || $0 == .uringGRO }
    if options.sendPaths.contains(where: \.isStream) {
        // The media path (plain and SRTP) beside raw uring-gso (and sendto) at the stream's
        // datagram size, interleaved.
        let receivers = sweepReceivers.isEmpty ? [receivePaths[0]] : sweepReceivers
        let cases = ([SendPath.sendto, .uringGSO] + options.sendPaths.filter(\.isStream)).flatMap { send in
            receivers.map { BenchCase(group: "stream", send: send, receive: $0, size: options.streamSize, batch: options.batch) }
        }
        groups.append(("stream", cases, options.roundCount, options.repeatCount))
    }
    guard options.runsSweeps else { return groups }
    // The sweeps leave out the comparison (uring-linked), measured in main.
    sendPaths = sendPaths.filter { $0 != .uringLinked }
    let sweepCount = max(1000, options.roundCount / 2)
    let sweepRepeats = min(3, options.repeatCount)
    for size in [200, 1200, 1472, 8972] {
        let label = "size-\(size)"
        let cases = sendPaths.flatMap { send in
            sweepReceivers.map { BenchCase(group: label, send: send, receive: $0, size: size, batch: options.batch) }
        }
        groups.append((label, cases, sweepCount, sweepRepeats))
    }
    for batch in [1, 8, 64, 256] {
        let label = "batch-\(batch)"
        let cases = sendPaths.map {
            BenchCase(group: label, send: $0, receive: receivePaths.contains(.uringGRO) ? .uringGRO : receivePaths[0],
                      size: options.size, batch: batch)
        }
        groups.append((label, cases, sweepCount, sweepRepeats))
    }
    return groups
}

func runSender() throws -> Int32 {
    let control: ControlChannel
    let receiverHost: String
    var child: Process?
    if options.mode == .send {
        let address = try SocketAddress.parse(options.to!)
        let connection = try connectControl(to: address)
        control = ControlChannel(readFD: connection, writeFD: connection)
        receiverHost = address.host
    } else {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        process.arguments = ["recv", "--listen", "127.0.0.1:0", "--control", "stdio", "--batch", "\(options.batch)",
                             "--recv-paths", (options.receivePaths.filter { $0 != .uringTimestamps } + [.uringTimestamps])
                                .map(\.rawValue).joined(separator: ",")]
        let toChild = Pipe()
        let fromChild = Pipe()
        process.standardInput = toChild
        process.standardOutput = fromChild
        try process.run()
        child = process
        control = ControlChannel(readFD: fromChild.fileHandleForReading.fileDescriptor,
                                 writeFD: toChild.fileHandleForWriting.fileDescriptor)
        receiverHost = "127.0.0.1"
    }
    let driver = try BenchDriver(options: options, control: control, receiverHost: receiverHost)
    let started = monotonicNanoseconds()
    var summaries: [CaseSummary] = []
    for group in plan(served: driver.servedReceivePaths) {
        let records = try driver.runGroup(group.cases, count: group.count, repeats: group.repeats, label: group.label)
        summaries += group.cases.map { CaseSummary($0, records[$0] ?? []) }
    }
    var pacing: [PacingSummary] = []
    if options.runsPacing {
        pacing = try driver.runPacing(rates: [10e6, 100e6, 1e9], size: 1200, seconds: options.quick ? 0.3 : 1.0,
                                      repeats: options.quick ? 1 : 3)
    }
    var video: [VideoSummary] = []
    if options.runsPacing {
        video = try driver.runVideo(bitratesKbps: [4_000, 20_000], seconds: options.quick ? 1 : 3,
                                    repeats: options.quick ? 1 : 3)
    }
    driver.finish()
    child?.waitUntilExit()
    computeRatios(&summaries)
    progress(String(format: "done in %.1f s", Double(monotonicNanoseconds() - started) / 1e9))

    print("CPU ns per datagram (median of \(options.repeatCount) interleaved rounds in main, fewer in sweeps); "
          + "x sendto: sender CPU against sendto with the same receiver; rcv x recvfrom: receiver CPU against recvfrom")
    print(renderTable(summaries))
    if !pacing.isEmpty {
        print("\nPacing: PacedSender (uring-gso, default quantum = 2 ms of the rate) -> uring-ts; rate and bursts from "
              + "the receiver's kernel timestamps; median of \(pacing[0].rounds.count) rounds, burst the largest")
        print(renderPacingTable(pacing))
    }
    if !video.isEmpty {
        print("\nLive video: x265 1280x720 access units handed at 30 fps in real time to MediaSender paced at 1.5 x the "
              + "bitrate -> uring-ts; CPU ns per datagram, frame spread from kernel timestamps; medians of "
              + "\(video[0].rounds.count) rounds")
        print(renderVideoTable(video))
    }
    let command = CommandLine.arguments.map { $0.contains(" ") ? "'\($0)'" : $0 }.joined(separator: " ")
    let directory = URL(fileURLWithPath: options.out)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    try renderJSON(summaries, pacing: pacing, video: video, machine: .current(), command: command, options: options)
        .write(to: directory.appendingPathComponent("bench.json"), atomically: true, encoding: .utf8)
    try renderCSV(summaries).write(to: directory.appendingPathComponent("bench.csv"), atomically: true, encoding: .utf8)
    progress("wrote \(directory.path)/bench.json and bench.csv")
    let failing = summaries.filter { !$0.intact }
    if video.contains(where: { !$0.intact }) {
        progress("video rounds did not deliver every datagram intact (with a timestamp)")
        if failing.isEmpty { return 1 }
    }
    if pacing.contains(where: { !$0.intact }) {
        progress("pacing rounds did not deliver every datagram intact (with a timestamp)")
        if failing.isEmpty { return 1 }
    }
    if !failing.isEmpty {
        progress("\(failing.count) runs did not deliver every datagram intact: "
                 + failing.map { "\($0.benchCase.group)/\($0.benchCase.send.rawValue)->\($0.benchCase.receive.rawValue)" }
                    .joined(separator: ", "))
        return 1
    }
    return 0
}

do {
    switch options.mode {
    case .recv:
        try runReceiver()
        exit(0)
    case .both, .send:
        exit(try runSender())
    }
} catch {
    exitReporting(error, prefix: "bench")
}
