import Glibc
import MediaSources
import StreamEngine
import UringIO

/// `streamer send --rtsp`: the source runs from the start; one RTSP client plays it (from a
/// keyframe); the run ends when that client leaves or the frame limit is reached.
func serveRTSP(_ options: SendOptions, _ configuration: SendConfiguration, server config: RTSPServerConfig) throws -> Int32 {
    let server = try RTSPServer(config: config)
    let gate = server.gate
    let stopFlag = MutexBox<Bool>(false)
    let statsWriter = MutexBox<StatsWriter?>(nil)
    let report = FinalReport {
        statsWriter.get()?.stop()
        let stats = gate.senderStats
        let client = gate.serverStats.client ?? "no client"
        printError("streamer send: \(stats.framesSent) frames, \(stats.packetsSent) packets, \(stats.bytesSent) bytes to \(client) over RTSP, session \(gate.serverStats.ended ?? "not played")")
        if let statsPath = options.statsPath { try writeJSON(rtspStatsObject(gate), to: statsPath) }
    }
    let trap = SignalTrap(finalReport: report) { stopFlag.set(true); gate.finish() }
    let source = LiveSource { printError(sourceStallLine($0)) }
    source.start(configuration.source, frameRate: configuration.frameRate, bitrateKbps: configuration.bitrateKbps,
                 frameLimit: nil, sink: gate, shouldStop: { stopFlag.get() || gate.isDone })
    source.waitUntilReady()
    if let failure = source.failure { printError("streamer send: \(failure)"); return 1 }
    let address = try server.localAddress()
    if !options.quiet { printError("streamer send: serving rtsp://\(address)/\(config.path) (one client)") }

    let progress = Progress(enabled: !options.quiet && isatty(2) != 0) { progressLine(gate.senderStats) }
    let eventPrinter = MutexBox<SenderEventPrinter?>(nil)
    statsWriter.set(StatsWriter(path: options.statsPath, interval: options.statsEvery) { rtspStatsObject(gate) })
    try server.run(parameterSets: source.parameterSets, onPlay: { eventPrinter.set(SenderEventPrinter(sender: $0, quiet: options.quiet)) },
                   onEvent: { if !options.quiet { printError("streamer send: \($0)") } })
    stopFlag.set(true)
    progress.stop()
    eventPrinter.get()?.waitUntilDrained()
    statsWriter.get()?.stop()
    withExtendedLifetime(trap) {}
    if let failure = source.failure { printError("streamer send: \(failure)"); return 1 }
    try report.write()
    return 0
}
