import Foundation
import StreamEngine
import UringIO

/// `streamer send --rtsp`: the source runs from the start; one RTSP client plays it (from a
/// keyframe); the run ends when that client leaves or the frame limit is reached.
func serveRTSP(_ options: SendOptions, plan: SourcePlan, fps: Int, sender: MediaSenderConfig,
               listen: SocketAddress) throws -> Int32 {
    var config = RTSPServerConfig(listen: listen, sender: sender)
    config.frameLimit = options.frames ?? options.duration.map { Int(($0 * Double(fps)).rounded(.up)) }
    config.frameRate = fps
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
    let source = SourceThread()
    source.start(plan: plan, fps: fps, bitrateKbps: max(1, Int(options.bitrate / 1000)), frameLimit: nil,
                 sender: gate, shouldStop: { stopFlag.get() || gate.isDone })
    source.ready.wait()
    if let failure = source.failure.get() { printError("streamer send: \(failure)"); return 1 }
    let address = try server.localAddress()
    if !options.quiet { printError("streamer send: serving rtsp://\(address)/\(config.path) (one client)") }

    let progress = Progress(enabled: !options.quiet && isatty(2) != 0) { progressLine(gate.senderStats) }
    let goneWatch = MutexBox<GoneWatch?>(nil)
    statsWriter.set(StatsWriter(path: options.statsPath, interval: options.statsEvery) { rtspStatsObject(gate) })
    try server.run(parameterSets: source.headers.get(), onPlay: { goneWatch.set(GoneWatch(sender: $0)) },
                   onEvent: { if !options.quiet { printError("streamer send: \($0)") } })
    stopFlag.set(true)
    progress.stop()
    goneWatch.get()?.stop()
    statsWriter.get()?.stop()
    withExtendedLifetime(trap) {}
    if let failure = source.failure.get() { printError("streamer send: \(failure)"); return 1 }
    try report.write()
    return 0
}

/// The sender's stats JSON with an `rtsp` object beside it.
func rtspStatsObject(_ gate: RTSPMediaGate) -> [String: Any] {
    var object = senderStatsObject([gate.senderStats])
    let server = gate.serverStats
    object["rtsp"] = ["connections": server.connections, "requests": server.requests, "rejected": server.rejected,
                      "client": server.client ?? NSNull(), "ended": server.ended ?? NSNull()] as [String: Any]
    return object
}
