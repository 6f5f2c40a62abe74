import Glibc
import MediaSources
import StreamEngine
import UringIO

/// `streamer send`: options, configuration, run, report.
func runSend(_ arguments: [String]) throws -> Int32 {
    if arguments.contains("--help") || arguments.contains("-h") { print(SendOptions.help); return 0 }
    let options = try SendOptions.parse(arguments)
    let configuration = try SendConfiguration(options)
    keepFreedHeapMemory()
    if let server = configuration.rtsp { return try serveRTSP(options, configuration, server: server) }

    let sender = try MediaSender(flows: configuration.flows)
    let stopFlag = MutexBox<Bool>(false)
    let source = LiveSource { printError(sourceStallLine($0)) }
    let statsWriter = MutexBox<StatsWriter?>(nil)
    let series = try StatsSeries(path: options.statsSeriesPath, interval: options.statsEvery ?? 1) {
        sendStatsObject(sender.allStats, source: source)
    }
    // Written once: at the end of the run, or by a second stop signal before it exits.
    let report = FinalReport {
        statsWriter.get()?.stop()
        series.stop()
        try reportSend(sender.allStats, source: source, statsPath: options.statsPath)
    }
    let trap = SignalTrap(finalReport: report) { stopFlag.set(true); sender.finish() }
    let hangup = HangupTrap { reresolve(options.targets, sender: sender) }
    let recorder = try options.recordPath.map { try RecordingSink(path: $0, sink: sender) }
    source.start(configuration.source, frameRate: configuration.frameRate, bitrateKbps: configuration.bitrateKbps,
                 peakBitrateKbps: configuration.peakBitrateKbps, frameLimit: configuration.frameLimit,
                 handOver: configuration.fast ? fastHandOver(sender) : .realTime,
                 sink: recorder ?? sender, shouldStop: { stopFlag.get() })
    source.waitUntilReady()
    if let failure = source.failure { printError("streamer send: \(failure)"); return 1 }
    if let sdpPath = options.sdpPath {
        try writeSDPFiles(sdpPath, flows: configuration.flows, parameterSets: source.parameterSets,
                          frameRate: configuration.frameRate, ssmSource: options.ssmSource, sender: sender)
    }
    let progress = Progress(enabled: !options.quiet && isatty(2) != 0) {
        progressLine(sender.stats) + (sender.flowCount > 1 ? " (flow 1 of \(sender.flowCount))" : "")
    }
    let eventPrinter = SenderEventPrinter(sender: sender, quiet: options.quiet)
    let follower = configuration.congestionControl
        ? TargetBitrateFollower(sender: sender, source: source, printChanges: options.printRateChanges) : nil
    statsWriter.set(StatsWriter(path: options.statsPath, interval: options.statsEvery) {
        sendStatsObject(sender.allStats, source: source)
    })
    try sender.run()
    progress.stop()
    eventPrinter.waitUntilDrained()
    statsWriter.get()?.stop()
    withExtendedLifetime((trap, hangup, follower)) {}
    if let failure = source.failure { printError("streamer send: \(failure)"); return 1 }
    if let failure = recorder?.writeError { printError("streamer send: \(failure)"); return 1 }
    try report.write()
    // Nothing at all got out to a receiver: that is a failure of the run, not a fault it rode through.
    return sender.allStats.contains { $0.packetsSent == 0 && $0.framesEncoded > 0 } ? 1 : 0
}

/// `--fast`: the source hands a frame over while fewer than 100 are unfinished in the slowest
/// flow (sent, or dropped as unviable, unconfirmed or for a full queue), by the engine's live
/// count (`MediaSender.framesFinished`): the engine queues 120 (`maxQueuedFrames`) and takes 120
/// more into its inbox. At 100 the source sleeps until the engine wakes it at 50 unfinished.
func fastHandOver(_ sender: MediaSender) -> HandOver {
    .fast(maxAhead: fastMaxAhead, finished: { sender.framesFinished },
          wait: { _ = sender.waitForFramesFinished($0, timeout: $1) })
}

/// `--fast`: the most frames handed over and not finished.
let fastMaxAhead = 100

/// The run's summary on stderr (`sendSummaryLines` of each flow) and the final `--stats` JSON.
func reportSend(_ all: [SenderStats], source: LiveSource, statsPath: String?) throws {
    for stats in all {
        for line in sendSummaryLines(stats) { printError(line) }
    }
    if let statsPath { try writeJSON(sendStatsObject(all, source: source), to: statsPath) }
}

/// One flow's summary: what was sent; the frames not sent and why (a full queue has no live
/// message, so without this line a pace below the stream's rate lost frames silently); the sends
/// that failed and their errors. Plain strings only: interpolating the MTU source's enum or the
/// error dictionary went through reflection (`Mirror`), ~0.9 ms of CPU per process
/// (results/profile.md section 24).
func sendSummaryLines(_ stats: SenderStats) -> [String] {
    var lines = ["streamer send: \(stats.framesSent) frames, \(stats.packetsSent) packets, \(stats.bytesSent) bytes to \(stats.destination), largest datagram \(stats.datagramSize) B (MTU \(stats.pathMTU), \(stats.mtuSource.rawValue))"]
    var dropped: [String] = []
    if stats.framesDroppedQueueFull > 0 {
        // With congestion control the controller sets the pace; else it is --pace (1.5 x bitrate).
        let why = stats.congestion != nil ? "the stream came faster than the path took it"
            : stats.pacingRate > 0 ? "the stream came faster than the pace, \(formatRate(stats.pacingRate))bit/s: raise --pace"
            : "the stream came faster than the socket took it"
        dropped.append("\(stats.framesDroppedQueueFull) for a full queue (\(why))")
    }
    if stats.framesDroppedUnconfirmed > 0 { dropped.append("\(stats.framesDroppedUnconfirmed) over the unconfirmed bound") }
    if stats.framesDroppedUnviable > 0 { dropped.append("\(stats.framesDroppedUnviable) while no route was viable") }
    let congestionDrops = stats.congestion?.framesDropped ?? 0
    if congestionDrops > 0 { dropped.append("\(congestionDrops) by congestion control (waited too long for the path)") }
    if !dropped.isEmpty {
        let total = stats.framesDroppedQueueFull + stats.framesDroppedUnconfirmed + stats.framesDroppedUnviable
            + congestionDrops
        lines.append("streamer send: \(total) frames to \(stats.destination) not sent: \(dropped.joined(separator: ", "))")
    }
    if stats.packetsFailed > 0 {
        let errors = stats.errorsByText.sorted { $0.key < $1.key }.map { "\($0.key) (\($0.value))" }
        lines.append("streamer send: \(stats.packetsFailed) packets to \(stats.destination) failed to send: \(errors.joined(separator: ", "))")
    }
    return lines
}
