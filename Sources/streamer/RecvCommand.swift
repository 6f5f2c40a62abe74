import Dispatch
import Glibc
import MediaFormats
import StreamEngine
import UringIO

let recvHelp = """
usage: streamer recv --listen [ADDR:]PORT [--out PATH | -] [--frames N | --duration SECONDS] [--stats PATH | -]
                     [--stats-every SECONDS] [--from HOST:PORT] [--no-feedback] [--feedback-interval SECONDS]
                     [--rtcp-mux] [--srtp-key @FILE [--srtp-suite NAME] | --sdp FILE] [--no-rtx] [--latency MS]
                     [--quiet]
  --out PATH|-     write the decodable frames (complete, from a keyframe on) as Annex B H.265 (ffmpeg -i x.hevc)
  --frames N       stop after N frames;  --duration S  stop after S seconds
  --stats PATH|-   final stats as JSON;  --stats-every S  also rewrite it while running
  --no-feedback    send no RTCP to the sender
  --feedback-interval S  feedback (RFC 8888, receiver report) at most every S seconds while packets
                   or sender reports arrive: at a frame's last packet once S has passed, or S
                   after the first packet not yet reported; default 0.02 (at least 0.001)
  --rtcp-mux       RTCP on the RTP port itself (RFC 5761), both ways, not RTP port + 1
  --from HOST:PORT accept the stream only from this address (default: the first valid stream, and
                   another, a sender started again, once it said BYE or was silent for 2 s)
  --srtp-key @FILE SRTP/SRTCP with the key in FILE (base64 of key and salt, as send's); refused if
                   others can read FILE. --srtp-suite NAME: its suite (default AES_CM_128_HMAC_SHA1_80)
  --sdp FILE       SRTP with the suite and key of FILE's a=crypto line (none: plain RTP); RFC 4588
                   RTX on the payload type of its a=rtpmap:N rtx/90000 line (RTP/AVPF), not 97
  --listen GROUP:PORT  a multicast group (239.1.2.3:5004, [ff3e::1234]:5004): joined, left on exit;
                   several receivers of one group may run on one host; feedback (receiver
                   reports, PLIs) goes to the sender's unicast address, at the RFC 3550
                   interval for the group's size (--feedback-interval does not apply)
  --source ADDR    with a multicast --listen: source-specific, only from ADDR (SSM join)
  --iface IFACE    with a multicast --listen: join on this interface (default: the route's)
  --no-rtx         ask for no retransmissions (default: NACK lost packets, take RFC 4588 RTX with
                   payload type 97 or originals resent, hold frames behind a gap until their deadline)
  --latency MS     playout delay: each frame goes out MS after its first packet arrived, and waits
                   at most MS for a missing packet after the gap was seen (default: max(50,
                   3 x RTT + jitter), the RTT from NACK to retransmission; more where asks fail
                   so often that two per loss would leave over 1 % unrepaired: playout.repairAsks)
"""

func runRecv(_ arguments: [String]) throws -> Int32 {
    if arguments.contains("--help") || arguments.contains("-h") { print(recvHelp); return 0 }
    var listen: SocketAddress?
    var outPath: String?
    var frames: Int?
    var duration: Double?
    var statsPath: String?
    var statsEvery: Double?
    var feedback = true
    var rtcpMux = false
    var feedbackInterval: Double?
    var from: SocketAddress?
    var quiet = false
    var srtp = SRTPOptions()
    var multicastSource: SocketAddress?
    var multicastInterface: UInt32 = 0
    var rtx = true
    var latency: Int?
    var reader = ArgumentReader(arguments)
    while let argument = reader.next() {
        switch argument {
        case "--listen": listen = try parseAddress(try reader.value(for: argument), option: argument, defaultHost: "0.0.0.0")
        case "--out": outPath = try reader.value(for: argument)
        case "--frames": frames = try parsePositiveInt(try reader.value(for: argument), option: argument)
        case "--duration": duration = try parseSeconds(try reader.value(for: argument), option: argument)
        case "--stats": statsPath = try reader.value(for: argument)
        case "--stats-every": statsEvery = try parseSeconds(try reader.value(for: argument), option: argument)
        case "--no-feedback": feedback = false
        case "--rtcp-mux": rtcpMux = true
        case "--feedback-interval":
            let value = try reader.value(for: argument)
            let seconds = try parseSeconds(value, option: argument)
            guard (0.001...10).contains(seconds) else {
                throw UsageError("\(argument): '\(value)' must be between 0.001 and 10 seconds")
            }
            feedbackInterval = seconds
        case "--from": from = try parseAddress(try reader.value(for: argument), option: argument)
        case "--quiet": quiet = true
        case "--no-rtx": rtx = false
        case "--latency": latency = try parsePositiveInt(try reader.value(for: argument), option: argument, range: 1...10_000)
        case "--source":
            let text = try reader.value(for: argument)
            guard let address = SocketAddress(ip: text, port: 0) else { throw UsageError("--source: '\(text)' is not a numeric address") }
            multicastSource = address
        case "--iface": multicastInterface = try interfaceIndex(try reader.value(for: argument))
        default:
            guard try srtp.parse(argument, &reader, sdp: true) else {
                throw UsageError("recv: unknown option '\(argument)' (see streamer recv --help)")
            }
        }
    }
    guard let listen else { throw UsageError("recv: --listen [ADDR:]PORT is required") }
    var config = MediaReceiverConfig(listen: listen)
    if listen.isMulticast {
        config.multicastSource = multicastSource
        config.multicastInterface = multicastInterface
        if let multicastSource, multicastSource.family != listen.family {
            throw UsageError("--source: \(multicastSource.host) is not of the group's address family")
        }
    } else if multicastSource != nil || multicastInterface != 0 {
        throw UsageError("--source/--iface: only with a multicast --listen address")
    }
    config.feedback = feedback
    config.rtcpMux = rtcpMux
    if let feedbackInterval { config.reportInterval = .seconds(feedbackInterval) }
    config.from = from
    guard !srtp.fresh else { throw UsageError("recv: --srtp makes a new key; give the sender's with --srtp-key @FILE or --sdp FILE") }
    config.srtp = try srtp.key()
    config.retransmission = rtx && feedback && !listen.isMulticast  // a group's sender answers no NACKs
    config.latency = latency.map { .milliseconds($0) }
    if let rtxPayloadType = try srtp.sessionDescription()?.retransmission?.payloadType {
        config.rtxPayloadType = rtxPayloadType
    }
    let receiver = try MediaReceiver(config: config)
    let statsWriter = StatsWriter(path: statsPath, interval: statsEvery) { receiverStatsObject(receiver.stats) }
    var output: Int32?
    if let outPath {
        if outPath == "-" {
            output = STDOUT_FILENO
        } else {
            // open(2), not FileManager.createFile: that writes a new file and renames it over the
            // path, which replaced a device or a FIFO given as --out with a regular file.
            let descriptor = open(outPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { throw UsageError("--out: cannot write '\(outPath)'") }
            output = descriptor
        }
    }
    defer { if let output, output != STDOUT_FILENO { close(output) } }
    let report = FinalReport { [statsPath] in
        statsWriter.stop()
        let stats = receiver.stats
        // A sender started again (`streamChanges`): the counts are of all its streams.
        let streams = stats.streamChanges > 0 ? ", \(stats.streamChanges + 1) streams one after another" : ""
        printError("streamer recv: \(stats.framesComplete) complete and \(stats.framesIncomplete) incomplete frames, \(stats.received) packets, \(stats.lost) lost, \(stats.bytesReceived) bytes\(streams)")
        if let statsPath { try writeJSON(receiverStatsObject(stats), to: statsPath) }
    }
    let trap = SignalTrap(finalReport: report) { receiver.stop() }
    if let duration {
        DispatchQueue.global().asyncAfter(deadline: .now() + duration) { receiver.stop() }
    }
    let progress = Progress(enabled: !quiet && isatty(2) != 0) {
        let s = receiver.stats
        return "received \(s.framesComplete) complete / \(s.framesIncomplete) incomplete frames, \(s.received) packets, lost \(s.lost)"
    }
    var annexB = output.map { AnnexBOutput(descriptor: $0) }
    try receiver.run(frameLimit: frames) { unit in
        // Only frames a decoder can use are written: complete, on an unbroken chain of
        // references from a keyframe. The rest are counted (frames.undecodable).
        guard unit.followsIntactChain, annexB != nil else { return }
        annexB!.write(unit.nalUnits)
        if annexB!.failure != 0 { receiver.stop() }  // the receiver stops; the error below
    }
    progress.stop()
    statsWriter.stop()
    withExtendedLifetime(trap) {}
    // Written whole, then on storage before the report says how much was written; a pipe or a
    // terminal has nothing to sync (EINVAL), nor has a read-only special file (EROFS).
    var failure = annexB?.failure ?? 0
    if failure == 0, let output, fsync(output) != 0, errno != EINVAL, errno != EROFS { failure = errno }
    if failure != 0 {
        try report.write()
        throw SystemError("cannot write", errno: failure, context: "--out '\(outPath ?? "-")'")
    }
    try report.write()
    return 0
}
