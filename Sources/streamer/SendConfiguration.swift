import Glibc
import MediaSources
import StreamEngine
import UringIO

/// What `streamer send` runs, made from its options: the source and its pace, and either one
/// sender configuration per `--to` or the RTSP server's.
struct SendConfiguration {
    /// Where the access units come from (`--source`).
    var source: MediaSource
    /// Frames per second the source is paced at (`--fps`, default 30; a y4m header's when
    /// the source is y4m and `--fps` is not given).
    var frameRate: Int
    /// The encoder's target (`--bitrate`), at least 1 kbit/s.
    var bitrateKbps: Int
    /// x265's VBV peak with congestion control (its highest target); nil: the encoder's default.
    var peakBitrateKbps: Int?
    /// Frames to send (`--frames`, or `--duration` at the frame rate); nil: until stopped.
    var frameLimit: Int?
    /// One per `--to`, in order (empty with `--rtsp`).
    var flows: [MediaSenderConfig]
    /// With `--rtsp`: the server, whose client's sender is configured like a `--to` flow.
    var rtsp: RTSPServerConfig?
    /// The flows obey a congestion controller (`--cc`, by default on for x265 sources).
    var congestionControl: Bool
    /// `--fast`: frames go to the engine as fast as it takes them, not at their times.
    var fast: Bool

    /// Resolves `--source` (a bad path is a usage error) and configures every flow.
    init(_ options: SendOptions) throws {
        switch options.source {
        case "synthetic": source = .synthetic(width: options.width, height: options.height)
        case "-": source = .y4m(InputFile.standardInput, frameRate: options.fps)
        case let path where path.hasSuffix(".y4m"):
            guard let file = InputFile(readingAtPath: path) else {
                throw UsageError("--source: cannot open '\(path)'")
            }
            source = .y4m(file, frameRate: options.fps)
        case let path:
            guard access(path, R_OK) == 0 else { throw UsageError("--source: cannot open '\(path)'") }
            source = .hevcFile(path: path)
        }
        let frameRate = options.fps ?? 30
        self.frameRate = frameRate
        var isFile = false
        if case .hevcFile = source { isFile = true }
        // A pace the user pinned (--pace, or pace= on a --to) is kept: no controller then unless asked.
        let pacePinned = options.pace != nil || options.targets.contains { $0.pace != nil }
        let multicast = options.targets.contains { $0.address.isMulticast }
        fast = options.fast
        let congestionControl = options.congestionControl
            ?? (!isFile && !options.fast && !pacePinned && !options.noFeedback && options.rtspListen == nil && !multicast)
        if (isFile || pacePinned) && options.congestionControl == nil, let given = options.congestionOptionsGiven.first {
            throw UsageError("\(given): congestion control is off by default for .hevc files and with --pace (add --cc on)")
        }
        self.congestionControl = congestionControl
        // The encoder opens at the controller's start bitrate.
        let bitrate = congestionControl ? options.congestionBitrates.start : options.bitrate
        bitrateKbps = max(1, Int(bitrate / 1000))
        // x265's VBV is fixed at open: at the controller's highest rate, so every change up to it
        // is made live (above it the encoder would reopen with a keyframe).
        peakBitrateKbps = congestionControl ? max(bitrateKbps, Int(options.congestionBitrates.maximum / 1000)) : nil
        frameLimit = options.frames ?? options.duration.map { Int(($0 * Double(frameRate)).rounded(.up)) }
        let key = try options.srtp.key()  // every flow under the same key (each has its own SSRC)
        flows = options.targets.enumerated().map { index, target in
            var config = senderConfig(options, destination: target.address, serviceClass: target.serviceClass,
                                      ecn: target.ecn, pace: target.pace)
            config.localPort = options.localPort.map { $0 + UInt16(2 * index) }
            if target.address.isMulticast {
                // The network copies; no receiver's feedback is per packet (README "many receivers").
                config.feedback = false
                config.multicastTTL = target.ttl ?? 1
                config.multicastInterface = options.multicastInterface
                config.multicastLoop = options.multicastLoop
            }
            if congestionControl {
                let rates = options.congestionBitrates
                config.congestionControl = .scream(ScreamConfiguration(
                    minBitrate: Int(rates.minimum), maxBitrate: Int(rates.maximum), startBitrate: Int(rates.start),
                    competesWithQueueBuildingFlows: options.ccCompete ?? true))
                config.targetBitrateWithoutFeedback = Int(rates.withoutFeedback)
            }
            config.srtp = key
            if isFile && target.pace == nil { config.followFileRate(options, congestionControl: congestionControl) }
            return config
        }
        if let listen = options.rtspListen {
            var sender = senderConfig(options, destination: listen)
            // RTSP clients are players (ffmpeg, GStreamer's rtspsrc) that take one payload type:
            // the originals are sent again on the media SSRC.
            sender.rtxSameSSRC = true
            if isFile { sender.followFileRate(options, congestionControl: congestionControl) }
            var server = RTSPServerConfig(listen: listen, sender: sender)
            server.frameLimit = frameLimit
            server.frameRate = frameRate
            rtsp = server
        }
    }
}

/// A flow's configuration from the options (`serviceClass`, `ecn` and `pace` override theirs).
func senderConfig(_ options: SendOptions, destination: SocketAddress, serviceClass: ServiceClass? = nil,
                  ecn: ECNCodepoint? = nil, pace: Double? = nil) -> MediaSenderConfig {
    var config = MediaSenderConfig(destination: destination)
    config.serviceClass = serviceClass ?? options.serviceClass
    config.ecn = ecn ?? options.ecn
    config.mtu = options.mtu
    if let reprobe = options.mtuReprobe { config.pathMTUReprobeInterval = .seconds(reprobe) }
    // --fast: unpaced unless a pace is given.
    config.paceBitsPerSecond = pace ?? options.pace ?? (options.fast ? nil : options.bitrate * 1.5)
    config.feedback = !options.noFeedback
    config.maxUnconfirmedBytes = options.maxUnconfirmed
    config.rtcpMux = options.rtcpMux
    config.retransmission = options.rtx && !options.noFeedback
    if let rtxTime = options.rtxTime { config.rtxTime = .milliseconds(rtxTime) }
    config.rtxSameSSRC = options.rtxSameSSRC
    if let interval = options.reportInterval { config.senderReportInterval = .seconds(interval) }
    // A --stats file rewritten more often than the engine's default publishing shows every rewrite.
    if let every = options.statsEvery { config.statsInterval = min(config.statsInterval, .seconds(every)) }
    return config
}

extension MediaSenderConfig {
    /// A `.hevc` file's rate is its own, not `--bitrate`'s: unless `--pace` pins it (or `--fast`,
    /// or congestion control, sets it), the flow's pace follows the file, at least 1.5 x its rate
    /// over the last second, with 1.5 x `--bitrate` as the least (so every frame goes at its time).
    mutating func followFileRate(_ options: SendOptions, congestionControl: Bool) {
        guard options.pace == nil, !options.fast, !congestionControl else { return }
        paceStreamMultiple = 1.5
    }
}
