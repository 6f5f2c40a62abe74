import Foundation
import MediaFormats
import StreamEngine
import Synchronization
import UringIO

/// `streamer send`: options as in the interface contract.
struct SendOptions {
    /// One flow per `--to`: where it goes as typed (re-resolved on SIGHUP) and its marks.
    struct Target {
        var text: String
        var address: SocketAddress
        var serviceClass: ServiceClass?
        var ecn: ECNCodepoint?
        var pace: Double?
    }
    var targets: [Target] = []
    var destination: SocketAddress? { targets.first?.address }
    var rtspListen: SocketAddress?
    var localPort: UInt16?
    var rtcpMux = false
    var source = "synthetic"
    var width = 1280
    var height = 720
    var fps: Int?
    var bitrate = 4_000_000.0
    var frames: Int?
    var duration: Double?
    var pace: Double?
    var serviceClass = ServiceClass.video
    var ecn = ECNCodepoint.ect0
    var mtu = MTUSetting.auto
    var maxUnconfirmed: Int?
    var noFeedback = false
    var sdpPath: String?
    var statsPath: String?
    var statsEvery: Double?
    var mtuReprobe: Double?
    var reportInterval: Double?
    var quiet = false

    static let help = """
    usage: streamer send --to HOST:PORT[,class=C][,ecn=E][,pace=RATE] [--to ...] | --rtsp [ADDR:]PORT [options]
      --to HOST:PORT[,class=C][,ecn=E][,pace=RATE]   send RTP to a receiver there (RTCP feedback from its
                                 port + 1); repeat for several flows in one engine (each with its own SSRC,
                                 bound, counters and pace, which it keeps to while the others are idle;
                                 class/ecn/pace override --class/--ecn/--pace). SIGHUP resolves every
                                 HOST again and moves a flow whose address changed
      --rtsp [ADDR:]PORT         serve the stream over RTSP instead (TCP, default address 0.0.0.0):
                                 one client plays rtsp://HOST:PORT/stream (RTP/UDP unicast); the run
                                 ends when it leaves (TEARDOWN or connection closed); --frames and
                                 --duration count from PLAY
      --rtcp-mux                 RTCP on the RTP ports themselves (RFC 5761), not RTP port + 1
      --local-port PORT          send from this even UDP port, RTCP on the next (default: any free pair;
                                 with several --to, flow i uses PORT + 2i)
      --source synthetic | PATH.hevc | PATH.y4m | -   default synthetic (x265-encoded test pattern); - reads y4m on stdin
      --size WxH                 synthetic source size (default 1280x720)
      --fps N                    frame rate (default 30, or the y4m header's)
      --bitrate RATE             encoder target (default 4M; k, M, G suffixes)
      --frames N | --duration S  default: until SIGINT/SIGTERM
      --pace RATE                pacing rate (default 1.5 x bitrate)
      --class background|default|video|realtime   DSCP CS1, CS0, AF41, EF (default video)
      --ecn off|ect0|ect1        default ect0
      --mtu auto|N               default auto
      --mtu-reprobe SECONDS      with --mtu auto: time between path-MTU searches (finds a larger path), default 15
      --max-unconfirmed BYTES    bound on sent-but-unconfirmed bytes (needs feedback; see README)
      --no-feedback              expect no RTCP
      --report-interval SECONDS  mean time between RTCP sender reports (RTT samples), default 0.1
      --sdp PATH                 write an SDP for ffplay/VLC/GStreamer
      --stats PATH|-             final stats as JSON
      --stats-every SECONDS      also rewrite the --stats file while running
      --quiet                    no progress on stderr
    """

    static func parse(_ arguments: [String]) throws -> SendOptions {
        var options = SendOptions()
        var reader = ArgumentReader(arguments)
        while let argument = reader.next() {
            switch argument {
            case "--to": options.targets.append(try parseTarget(try reader.value(for: argument)))
            case "--rtcp-mux": options.rtcpMux = true
            case "--local-port":
                let port = try parsePositiveInt(try reader.value(for: argument), option: argument, range: 1024...65_534)
                guard port % 2 == 0 else { throw UsageError("--local-port: \(port) must be even (RTCP goes from the next port)") }
                options.localPort = UInt16(port)
            case "--rtsp":
                options.rtspListen = try parseAddress(try reader.value(for: argument), option: argument, defaultHost: "0.0.0.0")
            case "--source": options.source = try reader.value(for: argument)
            case "--size":
                let text = try reader.value(for: argument)
                let parts = text.split(separator: "x")
                guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w > 0, h > 0, w % 2 == 0,
                      h % 2 == 0, w <= 8192, h <= 8192 else {
                    throw UsageError("--size: '\(text)' must be WxH with even numbers up to 8192")
                }
                options.width = w
                options.height = h
            case "--fps": options.fps = try parsePositiveInt(try reader.value(for: argument), option: argument, range: 1...240)
            case "--bitrate": options.bitrate = try parseRate(try reader.value(for: argument), option: argument)
            case "--frames": options.frames = try parsePositiveInt(try reader.value(for: argument), option: argument)
            case "--duration": options.duration = try parseSeconds(try reader.value(for: argument), option: argument)
            case "--pace": options.pace = try parseRate(try reader.value(for: argument), option: argument)
            case "--class": options.serviceClass = try parseServiceClass(try reader.value(for: argument), option: argument)
            case "--ecn": options.ecn = try parseECN(try reader.value(for: argument), option: argument)
            case "--mtu":
                let text = try reader.value(for: argument)
                options.mtu = text == "auto" ? .auto : .fixed(try parsePositiveInt(text, option: argument, range: 576...65_535))
            case "--max-unconfirmed":
                options.maxUnconfirmed = try parsePositiveInt(try reader.value(for: argument), option: argument)
            case "--no-feedback": options.noFeedback = true
            case "--sdp": options.sdpPath = try reader.value(for: argument)
            case "--stats": options.statsPath = try reader.value(for: argument)
            case "--report-interval":
                options.reportInterval = try parseSeconds(try reader.value(for: argument), option: argument)
            case "--mtu-reprobe":
                options.mtuReprobe = try parseSeconds(try reader.value(for: argument), option: argument)
            case "--stats-every": options.statsEvery = try parseSeconds(try reader.value(for: argument), option: argument)
            case "--quiet": options.quiet = true
            default: throw UsageError("send: unknown option '\(argument)' (see streamer send --help)")
            }
        }
        guard (options.destination == nil) != (options.rtspListen == nil) else {
            throw UsageError("send: exactly one of --to HOST:PORT and --rtsp [ADDR:]PORT is required")
        }
        if let port = options.localPort {
            guard options.rtspListen == nil else { throw UsageError("--local-port: not with --rtsp (SETUP announces the ports)") }
            guard Int(port) + 2 * (options.targets.count - 1) <= 65_534 else {
                throw UsageError("--local-port: \(port) + 2 per further --to passes 65534")
            }
        }
        if options.rtspListen != nil && options.sdpPath != nil {
            throw UsageError("--sdp: not with --rtsp (RTSP clients get the SDP from DESCRIBE)")
        }
        return options
    }

    /// `HOST:PORT[,class=C][,ecn=E][,pace=RATE]`.
    static func parseTarget(_ text: String) throws -> Target {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        var target = Target(text: parts[0], address: try parseAddress(parts[0], option: "--to"))
        for part in parts.dropFirst() {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            switch (pair.first, pair.count) {
            case ("class", 2): target.serviceClass = try parseServiceClass(pair[1], option: "--to \(parts[0]),class")
            case ("ecn", 2): target.ecn = try parseECN(pair[1], option: "--to \(parts[0]),ecn")
            case ("pace", 2): target.pace = try parseRate(pair[1], option: "--to \(parts[0]),pace")
            default: throw UsageError("--to: '\(part)' is not class=C, ecn=E or pace=RATE (in '\(text)')")
            }
        }
        return target
    }

    static func parseServiceClass(_ text: String, option: String) throws -> ServiceClass {
        guard let value = ServiceClass(rawValue: text) else {
            throw UsageError("\(option): '\(text)' is not one of background, default, video, realtime")
        }
        return value
    }

    static func parseECN(_ text: String, option: String) throws -> ECNCodepoint {
        switch text {
        case "off": return .notECT
        case "ect0": return .ect0
        case "ect1": return .ect1
        default: throw UsageError("\(option): '\(text)' is not one of off, ect0, ect1")
        }
    }
}

/// Where access units come from, on their own thread, at the stream's frame rate.
enum SourcePlan {
    case synthetic(width: Int, height: Int)
    case hevcFile(String)
    /// y4m frames, encoded; `fps` overrides the header's frame rate.
    case y4m(FileHandle, fps: Int?)
}

/// Runs a source on a thread: encodes or reads access units and hands them to the sender
/// in real time (frame i at start + i / fps), until the limit or `shouldStop`. A source that
/// falls behind by more than the stall threshold (blocked, or slower than real time) does not
/// catch up in a burst afterwards: its schedule starts again from the late frame.
final class SourceThread: @unchecked Sendable {  // @unchecked: fields are set before start and read by the thread only
    let failure = MutexBox<String?>(nil)
    let headers = MutexBox<[[UInt8]]>([])
    let ready = DispatchSemaphore(value: 0)
    /// Notices (from its own thread) when this source stops delivering access units.
    let stalls = SourceStallWatch()

    func start(plan: SourcePlan, fps: Int, bitrateKbps: Int, frameLimit: Int?, sender: any AccessUnitSink,
               shouldStop: @escaping @Sendable () -> Bool) {
        stalls.start(fps: fps)
        let thread = Thread { [self] in
            defer { stalls.sourceEnded(); sender.finish() }
            do {
                try produce(plan: plan, fps: fps, bitrateKbps: bitrateKbps, frameLimit: frameLimit, sender: sender,
                            shouldStop: shouldStop)
            } catch {
                failure.set("\(error)")
                ready.signal()
            }
        }
        thread.start()
    }

    private func produce(plan: SourcePlan, fps: Int, bitrateKbps: Int, frameLimit: Int?, sender: any AccessUnitSink,
                         shouldStop: @Sendable () -> Bool) throws {
        var start = monotonicNanoseconds()
        var index = 0
        var rate = fps
        /// Sleeps until frame `index` is due (start + index / rate). Frame `index - 1` was just
        /// delivered: a stall or a slow source that left it far behind its time moves the
        /// schedule on instead of sending the frames it missed back to back.
        func waitForSlot() {
            let now = monotonicNanoseconds()
            stalls.frameDelivered(now: now)
            let due = start + Int64(index) * 1_000_000_000 / Int64(rate)
            let late = now - due + 1_000_000_000 / Int64(rate)
            if late > SourceStallWatch.threshold(fps: rate) { start += late }
            if due > now { usleep(useconds_t((due - now) / 1000)) }
        }
        func done() -> Bool { shouldStop() || (frameLimit.map { index >= $0 } ?? false) }
        switch plan {
        case .synthetic(let width, let height):
            let encoder = try X265Encoder(EncoderConfig(width: width, height: height, fpsNumerator: fps,
                                                        bitrateKbps: bitrateKbps))
            headers.set(encoder.headers)
            ready.signal()
            let source = SyntheticSource(width: width, height: height)
            var frame = YUV420Frame(blackWithWidth: width, height: height)
            while !done() {
                source.render(frameIndex: index, into: &frame)
                if let unit = try encoder.encode(frame, forceKeyframe: sender.takeKeyframeRequest()) { sender.send(unit) }
                index += 1
                waitForSlot()
            }
        case .hevcFile(let path):
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw UsageError("cannot open \(path): no such file or not readable")
            }
            var splitter = AnnexBAccessUnitSplitter()
            var headersSent = false
            func deliver(_ units: [AccessUnit]) {
                for var unit in units where !done() {
                    if !headersSent {
                        headers.set(unit.nalUnits.filter { [32, 33, 34].contains(($0.first ?? 0) >> 1 & 0x3f) })
                        headersSent = true
                        ready.signal()
                    }
                    unit.timestamp = UInt32(truncatingIfNeeded: index * 90_000 / fps)
                    sender.send(unit)
                    index += 1
                    waitForSlot()
                }
            }
            while !done() {
                let chunk = handle.readData(ofLength: 1 << 20)
                if chunk.isEmpty { break }
                deliver(splitter.append([UInt8](chunk)))
            }
            deliver(splitter.finish())
            if !headersSent { ready.signal() }
            if index == 0 { throw UsageError("\(path): no HEVC access units found (is it an Annex B .hevc file?)") }
        case .y4m(let handle, let fpsOverride):
            var reader = Y4MReader()
            var encoder: X265Encoder?
            while !done() {
                let chunk = handle.readData(ofLength: 1 << 20)
                if chunk.isEmpty { break }
                let frames = try reader.append([UInt8](chunk))
                for frame in frames where !done() {
                    if encoder == nil {
                        let header = reader.header!
                        if let fpsOverride {
                            rate = fpsOverride
                        } else if header.frameRateDenominator > 0 {
                            rate = max(1, header.frameRateNumerator / header.frameRateDenominator)
                        }
                        stalls.setFrameRate(rate)
                        encoder = try X265Encoder(EncoderConfig(width: frame.width, height: frame.height,
                                                                fpsNumerator: rate, bitrateKbps: bitrateKbps))
                        headers.set(encoder!.headers)
                        ready.signal()
                    }
                    let yuv = YUV420Frame(width: frame.width, height: frame.height, bytes: frame.data)
                    if let unit = try encoder!.encode(yuv, forceKeyframe: sender.takeKeyframeRequest()) { sender.send(unit) }
                    index += 1
                    waitForSlot()
                }
            }
            if encoder == nil { ready.signal(); throw UsageError("y4m input ended before its first frame") }
            for unit in encoder!.flush() { sender.send(unit) }
        }
    }
}

/// A value behind a lock, for a thread to publish.
final class MutexBox<T: Sendable>: Sendable {
    private let lock: Mutex<T>
    init(_ value: T) { lock = Mutex(value) }
    func set(_ value: T) { lock.withLock { $0 = value } }
    func get() -> T { lock.withLock { $0 } }
}

/// The sender's stats JSON, as in the interface contract: the first flow's keys at the top
/// level (all there is with one `--to`), and every flow's under `flows`.
func senderStatsObject(_ all: [SenderStats]) -> [String: Any] {
    var object = flowStatsObject(all[0])
    object["role"] = "send"
    object["cpu"] = cpuObject()
    object["flows"] = all.map(flowStatsObject)
    return object
}

/// One flow's stats keys.
func flowStatsObject(_ stats: SenderStats) -> [String: Any] {
    func number(_ value: Double?) -> Any { value.map { ($0 * 1000).rounded() / 1000 } ?? NSNull() }
    return [
        "destination": stats.destination,
        "ssrc": Int(stats.ssrc),
        "redirects": stats.redirects,
        "packets": ["sent": stats.packetsSent, "confirmed": stats.packetsConfirmed, "lost": stats.packetsLost,
                    "unconfirmed": stats.packetsUnconfirmed, "abandoned": stats.packetsAbandoned,
                    "failed": stats.packetsFailed],
        "bytes": ["sent": stats.bytesSent, "unconfirmed": stats.bytesUnconfirmed,
                  "peakUnconfirmed": stats.peakUnconfirmedBytes, "maxUnconfirmed": stats.maxUnconfirmedBytes],
        "frames": ["encoded": stats.framesEncoded, "sent": stats.framesSent,
                   "droppedUnconfirmed": stats.framesDroppedUnconfirmed,
                   "droppedQueueFull": stats.framesDroppedQueueFull, "keyframes": stats.keyframes],
        "path": ["mtu": stats.pathMTU, "mtuSource": stats.mtuSource, "datagramSize": stats.datagramSize,
                 "clamped": stats.clamped, "framesClamped": stats.framesClamped,
                 "probes": ["sent": stats.probesSent, "confirmed": stats.probesConfirmed, "lost": stats.probesLost],
                 "icmpReports": stats.icmpMTUReports, "blackHoles": stats.blackHoles, "searches": stats.mtuSearches,
                 "foundAfterMs": number(stats.mtuFoundAfterMs)],
        "rttMs": ["last": number(stats.rttLast), "min": number(stats.rttMin), "smoothed": number(stats.rttSmoothed),
                  "lastAtUnix": stats.rttLastAt ?? NSNull()],
        "ecn": ["codepoint": stats.ecn, "ceReported": stats.ceReported],
        "dscp": Int(stats.dscp),
        "pacing": ["rateBps": stats.pacingRate, "batches": stats.batches,
                   "datagramsPerSubmit": stats.batches > 0 ? Double(stats.packetsSent) / Double(stats.batches) : 0,
                   "sends": stats.sendCalls, "gso": stats.gsoSends, "ioUringEnters": stats.enterCalls, "flows": stats.flows,
                   "mixedSubmissions": stats.mixedSubmissions],
        "feedback": ["enabled": stats.feedback, "absent": stats.feedbackAbsent, "reports": stats.feedbackReports, "rejected": stats.feedbackRejected,
                     "intervalMs": number(stats.feedbackIntervalMs),
                     "senderReports": stats.senderReports, "keyframeRequests": stats.keyframeRequests,
                     "keyframeRequestsIgnored": stats.keyframeRequestsIgnored, "kernelDrops": stats.feedbackKernelDrops],
        "receiverGone": stats.receiverGone,
        "receiverGoneEvents": stats.receiverGoneEvents,
        "errors": stats.errors,
    ]
}

/// The sender's stats JSON with the source's own object (`source`: stalls) beside the engine's.
func sendStatsObject(_ all: [SenderStats], source: SourceThread) -> [String: Any] {
    var object = senderStatsObject(all)
    object["source"] = source.stalls.statsObject()
    return object
}

/// A flow's configuration from the options (`serviceClass`, `ecn` and `pace` override theirs).
func senderConfig(_ options: SendOptions, destination: SocketAddress, serviceClass: ServiceClass? = nil,
                  ecn: ECNCodepoint? = nil, pace: Double? = nil) -> MediaSenderConfig {
    var config = MediaSenderConfig(destination: destination)
    config.serviceClass = serviceClass ?? options.serviceClass
    config.ecn = ecn ?? options.ecn
    config.mtu = options.mtu
    if let reprobe = options.mtuReprobe { config.pathMTUReprobeInterval = Int64(reprobe * 1e9) }
    config.paceBitsPerSecond = pace ?? options.pace ?? options.bitrate * 1.5
    config.feedback = !options.noFeedback
    config.maxUnconfirmedBytes = options.maxUnconfirmed
    config.rtcpMux = options.rtcpMux
    if let interval = options.reportInterval { config.senderReportInterval = Int64(interval * 1e9) }
    // A --stats file rewritten more often than the engine's default publishing shows every rewrite.
    if let every = options.statsEvery { config.statsInterval = min(config.statsInterval, Int64(every * 1e9)) }
    return config
}

func runSend(_ arguments: [String]) throws -> Int32 {
    if arguments.contains("--help") || arguments.contains("-h") { print(SendOptions.help); return 0 }
    let options = try SendOptions.parse(arguments)
    let plan: SourcePlan
    switch options.source {
    case "synthetic": plan = .synthetic(width: options.width, height: options.height)
    case "-": plan = .y4m(FileHandle.standardInput, fps: options.fps)
    case let path where path.hasSuffix(".y4m"):
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw UsageError("--source: cannot open '\(path)'")
        }
        plan = .y4m(handle, fps: options.fps)
    case let path:
        guard FileManager.default.isReadableFile(atPath: path) else { throw UsageError("--source: cannot open '\(path)'") }
        plan = .hevcFile(path)
    }
    let fps = options.fps ?? 30
    let configs = options.targets.enumerated().map { index, target in
        var config = senderConfig(options, destination: target.address, serviceClass: target.serviceClass,
                                  ecn: target.ecn, pace: target.pace)
        config.localPort = options.localPort.map { $0 + UInt16(2 * index) }
        return config
    }
    if let listen = options.rtspListen {
        return try serveRTSP(options, plan: plan, fps: fps, sender: senderConfig(options, destination: listen), listen: listen)
    }
    let sender = try MediaSender(flows: configs)
    let stopFlag = MutexBox<Bool>(false)
    let source = SourceThread()
    let statsWriter = MutexBox<StatsWriter?>(nil)
    let report = FinalReport {
        statsWriter.get()?.stop()
        let all = sender.allStats
        for stats in all {
            printError("streamer send: \(stats.framesSent) frames, \(stats.packetsSent) packets, \(stats.bytesSent) bytes to \(stats.destination), largest datagram \(stats.datagramSize) B (MTU \(stats.pathMTU), \(stats.mtuSource))")
            if stats.packetsFailed > 0 {
                printError("streamer send: \(stats.packetsFailed) packets to \(stats.destination) failed to send: \(stats.errors)")
            }
        }
        if let statsPath = options.statsPath { try writeJSON(sendStatsObject(all, source: source), to: statsPath) }
    }
    let trap = SignalTrap(finalReport: report) { stopFlag.set(true); sender.finish() }
    let hangup = HangupTrap { reresolve(options.targets, sender: sender) }
    let frameLimit = options.frames ?? options.duration.map { Int(($0 * Double(fps)).rounded(.up)) }
    source.start(plan: plan, fps: fps, bitrateKbps: max(1, Int(options.bitrate / 1000)), frameLimit: frameLimit,
                 sender: sender, shouldStop: { stopFlag.get() })
    source.ready.wait()
    if let failure = source.failure.get() { printError("streamer send: \(failure)"); return 1 }
    if let sdpPath = options.sdpPath {
        for (index, target) in options.targets.enumerated() {
            try writeSDP(to: sdpFilePath(sdpPath, flow: index), destination: target.address, headers: source.headers.get(),
                         fps: fps, rtcpMux: options.rtcpMux)
        }
    }
    let progress = Progress(enabled: !options.quiet && isatty(2) != 0) {
        progressLine(sender.stats) + (sender.flowCount > 1 ? " (flow 1 of \(sender.flowCount))" : "")
    }
    let goneWatch = GoneWatch(sender: sender)
    statsWriter.set(StatsWriter(path: options.statsPath, interval: options.statsEvery) {
        sendStatsObject(sender.allStats, source: source)
    })
    try sender.run()
    progress.stop()
    goneWatch.stop()
    statsWriter.get()?.stop()
    withExtendedLifetime((trap, hangup)) {}
    if let failure = source.failure.get() { printError("streamer send: \(failure)"); return 1 }
    try report.write()
    let all = sender.allStats
    // Nothing at all got out to a receiver: that is a failure of the run, not a fault it rode through.
    return all.contains { $0.packetsSent == 0 && $0.framesEncoded > 0 } ? 1 : 0
}

/// The SDP file of flow `index`: `path` itself for the first, `NAME-<index>.EXT` for the others.
func sdpFilePath(_ path: String, flow index: Int) -> String {
    guard index > 0 else { return path }
    let url = URL(fileURLWithPath: path)
    let ext = url.pathExtension
    let base = url.deletingPathExtension().path
    return ext.isEmpty ? "\(base)-\(index)" : "\(base)-\(index).\(ext)"
}

/// Writes an SDP that ffplay, VLC and GStreamer open to receive the stream at `destination`.
func writeSDP(to path: String, destination: SocketAddress, headers: [[UInt8]], fps: Int, rtcpMux: Bool) throws {
    let sdp = SDPSessionDescription(
        sessionID: UInt64(Date().timeIntervalSince1970), sessionVersion: 1, sessionName: "streamer",
        originAddress: destination.host, connectionAddress: destination.host, port: destination.port,
        payloadType: 96, encodingName: "H265", clockRate: 90_000,
        vps: headers.filter { ($0[0] >> 1) & 0x3f == 32 }, sps: headers.filter { ($0[0] >> 1) & 0x3f == 33 },
        pps: headers.filter { ($0[0] >> 1) & 0x3f == 34 }, rtcpPort: nil, rtcpMux: rtcpMux,
        frameRate: (fps, 1))
    try sdp.text.write(toFile: path, atomically: true, encoding: .utf8)
}

/// SIGHUP: resolves every `--to` again and moves each flow whose address changed; one line
/// on stderr per flow that moved or could not be resolved.
func reresolve(_ targets: [SendOptions.Target], sender: MediaSender) {
    let current = sender.allStats
    for (index, target) in targets.enumerated() {
        do {
            let address = try SocketAddress.parse(target.text)
            let now = current[index].destination
            guard "\(address)" != now else { continue }
            guard address.family == target.address.family else {
                printError("streamer send: SIGHUP: \(target.text) now resolves to \(address), another address family; staying at \(now)")
                continue
            }
            printError("streamer send: SIGHUP: \(target.text) now resolves to \(address) (was \(now)); moving the flow")
            sender.redirect(to: address, flow: index)
        } catch {
            printError("streamer send: SIGHUP: cannot resolve \(target.text) (\(error)); staying at \(current[index].destination)")
        }
    }
}

/// The live progress line.
func progressLine(_ s: SenderStats) -> String {
    let rtt = s.rttSmoothed.map { String(format: "%.2f ms", $0) } ?? "-"
    return "sent \(s.framesSent) frames, \(s.packetsSent) packets, \(s.bytesSent) bytes; confirmed \(s.packetsConfirmed), lost \(s.packetsLost), unconfirmed \(s.bytesUnconfirmed) B; RTT \(rtt)"
}

/// Says once on stderr when the receiver stops sending feedback, and once when it is back.
final class GoneWatch: Sendable {
    private let running = MutexBox<Bool>(true)
    init(sender: MediaSender) {
        let running = self.running
        Thread {
            let count = sender.flowCount
            var gone = Array(repeating: false, count: count)
            var absentSaid = Array(repeating: false, count: count)
            var errorsSaid = Array(repeating: Set<String>(), count: count)
            while running.get() {
                usleep(100_000)
                for (index, stats) in sender.allStats.enumerated() {
                    // With several flows, each line names its flow's receiver.
                    let prefix = count > 1 ? "streamer send: [\(stats.destination)]" : "streamer send:"
                    for (reason, failed) in stats.errors where !errorsSaid[index].contains(reason) {
                        // Once per kind of error, not once per datagram: the count is in the stats.
                        errorsSaid[index].insert(reason)
                        printError("\(prefix) sends failing: \(reason) (\(failed) datagrams so far; counted in stats.errors)")
                    }
                    if stats.feedbackAbsent && !absentSaid[index] {
                        absentSaid[index] = true
                        printError("\(prefix) no RTCP feedback from the receiver (ffmpeg/ffplay send none); running without the unconfirmed bound (use --no-feedback to say so)")
                    }
                    if stats.receiverGone != gone[index] {
                        gone[index] = stats.receiverGone
                        printError(gone[index] ? "\(prefix) the receiver stopped sending feedback; holding at \(stats.bytesUnconfirmed) unconfirmed bytes"
                                               : "\(prefix) the receiver is back; resuming with a keyframe")
                    }
                }
            }
        }.start()
    }
    func stop() { running.set(false) }
}

/// A line of progress on stderr once a second, on its own thread.
final class Progress: Sendable {
    private let running = MutexBox<Bool>(true)
    init(enabled: Bool, line: @escaping @Sendable () -> String) {
        guard enabled else { return }
        let running = self.running
        Thread {
            while running.get() {
                sleep(1)
                if running.get() { printError(line()) }
            }
        }.start()
    }
    func stop() { running.set(false) }
}
