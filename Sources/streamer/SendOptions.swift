import StreamEngine
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
        /// `ttl=N` for a multicast destination (default 1).
        var ttl: Int?
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
    var rtx = true
    var rtxTime: Int?
    var rtxSameSSRC = false
    var quiet = false
    /// `--cc on|off`; nil: on for x265 sources (synthetic, y4m), off for `.hevc` files, a pinned
    /// pace and `--rtsp`.
    var congestionControl: Bool?
    var minBitrate: Double?
    var maxBitrate: Double?
    var startBitrate: Double?
    /// `--cc-compete on|off`; nil: on (the controller competes with a flow that keeps the queue
    /// standing, `ScreamConfiguration.competesWithQueueBuildingFlows`).
    var ccCompete: Bool?
    var printRateChanges = false
    var statsSeriesPath: String?
    var srtp = SRTPOptions()
    /// `--multicast-if IFACE`: the interface index multicast leaves by.
    var multicastInterface: UInt32?
    /// `--multicast-loop on|off`.
    var multicastLoop = true
    /// `--ssm-source ADDR`: the SDP's `a=source-filter` source for source-specific receivers.
    var ssmSource: String?
    /// `--fast`: frames handed to the engine as soon as they are read or encoded, unpaced unless
    /// a pace is given.
    var fast = false
    /// `--record PATH`: the access units sent, written there as Annex B.
    var recordPath: String?

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
      --to GROUP:PORT[,ttl=N]    a multicast group (239.1.2.3:5004, [ff3e::1234]:5004): sent once, copied
                                 by the network; ttl= the hop limit (default 1). No feedback, bound or
                                 congestion control apply to a multicast flow (see README "many receivers")
      --multicast-if IFACE       multicast leaves by this interface (default: the route's)
      --multicast-loop on|off    receivers on this host hear the multicast stream (default on)
      --ssm-source ADDR          the --sdp says a=source-filter: incl ... ADDR (RFC 4570) for SSM receivers
      --rtcp-mux                 RTCP on the RTP ports themselves (RFC 5761), not RTP port + 1
      --local-port PORT          send from this even UDP port, RTCP on the next (default: any free pair;
                                 with several --to, flow i uses PORT + 2i)
      --source synthetic | PATH.hevc | PATH.y4m | -   default synthetic (x265-encoded test pattern); - reads y4m on stdin
      --size WxH                 synthetic source size (default 1280x720)
      --fps N                    frame rate (default 30, or the y4m header's)
      --bitrate RATE             encoder target (default 4M; k, M, G suffixes)
      --frames N | --duration S  default: until SIGINT/SIGTERM
      --fast                     as fast as the engine goes: each frame is handed over as soon as it
                                 is read or encoded, not at its time (RTP timestamps still count at
                                 --fps); unpaced unless --pace or pace= is given; not with --rtsp,
                                 --duration or --cc on
      --record PATH              also write the access units sent into PATH as Annex B (.hevc), e.g.
                                 what x265 made of a synthetic or y4m source; not with --rtsp
      --pace RATE                pacing rate (default 1.5 x bitrate; a .hevc file: also at least
                                 1.5 x the file's own rate over the last second)
      --class background|default|video|realtime   DSCP CS1, CS0, AF41, EF (default video)
      --ecn off|ect0|ect1        default ect0
      --mtu auto|N               default auto
      --mtu-reprobe SECONDS      with --mtu auto: time between path-MTU searches (finds a larger path), default 15
      --max-unconfirmed BYTES    bound on sent-but-unconfirmed bytes (needs feedback; see README)
      --no-feedback              expect no RTCP
      --report-interval SECONDS  mean time between RTCP sender reports (RTT samples), default 0.1
      --no-rtx                   do not retransmit what the receiver NACKs (default: RFC 4588 RTX,
                                 payload type 97, on an SSRC of its own; off with --no-feedback)
      --rtx-time MS              how long sent packets can be retransmitted, default 500
      --rtx-same-ssrc            retransmit the original packet on the media SSRC (for ffmpeg, which
                                 takes one payload type; its SDP then offers NACK without rtx);
                                 always so with --rtsp
      --sdp PATH                 write an SDP for ffplay/VLC/GStreamer (with SRTP: RTP/SAVP, a=crypto
                                 with the key, the file readable by its owner only)
      --srtp                     SRTP/SRTCP (RFC 3711) with a fresh random key (written into the --sdp)
      --srtp-key @FILE           SRTP with the key in FILE: base64 of the 30-byte key and salt (RFC 4568
                                 inline:, ffmpeg's -srtp_out_params); refused if others can read FILE
      --srtp-suite NAME          AES_CM_128_HMAC_SHA1_80 (default), AES_CM_128_HMAC_SHA1_32,
                                 AEAD_AES_128_GCM, AEAD_AES_256_GCM (key + salt 28 and 44 bytes)
      --stats PATH|-             final stats as JSON
      --stats-every SECONDS      also rewrite the --stats file while running
      --stats-series PATH        append the stats as one JSON line (with t, seconds) every --stats-every
                                 seconds (default 1), to plot a run over time
      --cc on|off                congestion control (SCReAM): the path sets the pace and the encoder's
                                 bitrate (default on for synthetic and y4m sources; off for .hevc files,
                                 which it can only pace and drop whole frames of, with --pace or pace=,
                                 and for --rtsp)
      --min-bitrate RATE         with --cc: the lowest target (default 150k, at most the others)
      --max-bitrate RATE         with --cc: the highest target (default --bitrate)
      --start-bitrate RATE       with --cc: the target before any feedback, where the encoder opens
                                 (default a quarter of --bitrate, at least 1M, within min..max; a
                                 receiver without per-packet reports gets --bitrate once that is known)
      --cc-compete on|off        with --cc: when a flow that keeps the queue standing (TCP in a deep
                                 buffer) holds this one at its minimum, compete on loss (default on)
      --print-rate-changes       say each new target bitrate on stderr
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
            case "--no-rtx": options.rtx = false
            case "--rtx-time":
                options.rtxTime = try parsePositiveInt(try reader.value(for: argument), option: argument, range: 1...10_000)
            case "--rtx-same-ssrc": options.rtxSameSSRC = true
            case "--cc":
                let text = try reader.value(for: argument)
                guard text == "on" || text == "off" else { throw UsageError("--cc: '\(text)' is not one of on, off") }
                options.congestionControl = text == "on"
            case "--min-bitrate": options.minBitrate = try parseRate(try reader.value(for: argument), option: argument)
            case "--max-bitrate": options.maxBitrate = try parseRate(try reader.value(for: argument), option: argument)
            case "--start-bitrate": options.startBitrate = try parseRate(try reader.value(for: argument), option: argument)
            case "--cc-compete":
                let text = try reader.value(for: argument)
                guard text == "on" || text == "off" else { throw UsageError("--cc-compete: '\(text)' is not one of on, off") }
                options.ccCompete = text == "on"
            case "--print-rate-changes": options.printRateChanges = true
            case "--stats-series": options.statsSeriesPath = try reader.value(for: argument)
            case "--multicast-if": options.multicastInterface = try interfaceIndex(try reader.value(for: argument))
            case "--multicast-loop":
                let text = try reader.value(for: argument)
                guard text == "on" || text == "off" else { throw UsageError("--multicast-loop: '\(text)' is not one of on, off") }
                options.multicastLoop = text == "on"
            case "--fast": options.fast = true
            case "--record": options.recordPath = try reader.value(for: argument)
            case "--ssm-source":
                let text = try reader.value(for: argument)
                guard SocketAddress(ip: text, port: 0) != nil else { throw UsageError("--ssm-source: '\(text)' is not a numeric address") }
                options.ssmSource = text
            default:
                guard try options.srtp.parse(argument, &reader, sdp: false) else {
                    throw UsageError("send: unknown option '\(argument)' (see streamer send --help)")
                }
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
        if options.rtspListen != nil && (options.srtp.fresh || options.srtp.keyFile != nil) {
            throw UsageError("--srtp: not with --rtsp (not supported: DESCRIBE would carry the key in clear)")
        }
        if options.rtspListen != nil && options.sdpPath != nil {
            throw UsageError("--sdp: not with --rtsp (RTSP clients get the SDP from DESCRIBE)")
        }
        if options.rtspListen != nil && options.statsSeriesPath != nil {
            throw UsageError("--stats-series: not with --rtsp")
        }
        try options.checkFast()
        try options.checkMulticast()
        try options.checkCongestionControl()
        return options
    }

    /// The congestion controller's bitrates (bits per second): what was given, and defaults that
    /// fit around it (the maximum `--bitrate`, or above it when a given minimum or start is; the
    /// start a quarter of `--bitrate`, at least 1M: the controller climbs from there within a
    /// few reports, and a path that carries less than `--bitrate` is not flooded at the start),
    /// and the target for a receiver that sends no per-packet reports (`--bitrate`).
    var congestionBitrates: (minimum: Double, start: Double, maximum: Double, withoutFeedback: Double) {
        let maximum = maxBitrate ?? max(bitrate, minBitrate ?? 0, startBitrate ?? 0)
        let minimum = minBitrate ?? min(150_000, startBitrate ?? maximum, maximum)
        let start = startBitrate ?? min(max(bitrate / 4, 1_000_000, minimum), maximum)
        return (minimum, start, maximum, min(max(bitrate, minimum), maximum))
    }

    /// `--fast` hands frames over without their times: not for an RTSP player, a `--duration`
    /// (which counts real time) or a congestion controller (which paces by them); `--record`
    /// not with `--rtsp` (the source runs before PLAY).
    private func checkFast() throws {
        if recordPath != nil && rtspListen != nil { throw UsageError("--record: not with --rtsp") }
        guard fast else { return }
        if rtspListen != nil { throw UsageError("--fast: not with --rtsp (an RTSP client plays in real time)") }
        if duration != nil { throw UsageError("--fast: not with --duration (it counts real time; use --frames)") }
        if congestionControl == true { throw UsageError("--fast: not with --cc on (the controller paces the frames by their times)") }
    }

    /// A multicast flow has no feedback: `--cc on` and `--max-unconfirmed` are refused with one;
    /// `ttl=` only on a multicast `--to`.
    private func checkMulticast() throws {
        for target in targets where target.ttl != nil && !target.address.isMulticast {
            throw UsageError("--to \(target.text): ttl= only for a multicast group")
        }
        guard let group = targets.first(where: { $0.address.isMulticast }) else { return }
        if congestionControl == true { throw UsageError("--cc on: not with a multicast --to (\(group.text): no per-packet feedback)") }
        if maxUnconfirmed != nil { throw UsageError("--max-unconfirmed: not with a multicast --to (\(group.text): no per-packet feedback)") }
    }

    /// The options that only work with congestion control, as given.
    var congestionOptionsGiven: [String] {
        [("--min-bitrate", minBitrate != nil), ("--max-bitrate", maxBitrate != nil),
         ("--start-bitrate", startBitrate != nil), ("--cc-compete", ccCompete != nil)].filter(\.1).map(\.0)
    }

    /// `--cc` and its bitrates fit together: `--cc on` needs feedback and a `--to`; the bitrates
    /// only with `--cc` (not `off`), with min <= start <= max.
    private func checkCongestionControl() throws {
        if congestionControl == true {
            if noFeedback { throw UsageError("--cc on: needs RTCP feedback (not with --no-feedback)") }
            if rtspListen != nil { throw UsageError("--cc on: not with --rtsp (RTSP clients send no per-packet feedback)") }
        }
        let given = congestionOptionsGiven
        if let first = given.first, congestionControl == false || noFeedback || rtspListen != nil {
            throw UsageError("\(first): only with congestion control (--cc on)")
        }
        let rates = congestionBitrates
        if rates.minimum > rates.maximum {
            throw UsageError("--min-bitrate: \(formatRate(rates.minimum)) is above the maximum \(formatRate(rates.maximum)) (--max-bitrate)")
        }
        if rates.start < rates.minimum || rates.start > rates.maximum {
            throw UsageError("--start-bitrate: \(formatRate(rates.start)) is not within \(formatRate(rates.minimum))..\(formatRate(rates.maximum)) (--min-bitrate..--max-bitrate)")
        }
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
            case ("ttl", 2): target.ttl = try parsePositiveInt(pair[1], option: "--to \(parts[0]),ttl", range: 1...255)
            default: throw UsageError("--to: '\(part)' is not class=C, ecn=E, pace=RATE or ttl=N (in '\(text)')")
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
