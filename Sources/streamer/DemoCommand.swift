import Dispatch
import MediaFormats
import MediaSources
import StreamEngine
import UringIO

let demoHelp = """
usage: streamer demo [--seconds N] [--size WxH] [--bitrate RATE] [--stats PATH | -]
  Encodes N seconds (default 3) of the synthetic test pattern with x265, sends it over
  loopback through the io_uring engine, receives it, and prints what went out and came in.
  --stats PATH|-   both ends' final stats as JSON ({"role": "demo", "version", "send", "recv"})
"""

func runDemo(_ arguments: [String]) throws -> Int32 {
    if arguments.contains("--help") || arguments.contains("-h") { print(demoHelp); return 0 }
    var seconds = 3.0
    var width = 1280, height = 720
    var bitrate = 4_000_000.0
    var statsPath: String?
    var reader = ArgumentReader(arguments)
    while let argument = reader.next() {
        switch argument {
        case "--seconds": seconds = try parseSeconds(try reader.value(for: argument), option: argument)
        case "--size":
            let parts = try reader.value(for: argument).split(separator: "x").compactMap { Int($0) }
            guard parts.count == 2, parts.allSatisfy({ $0 > 0 && $0 % 2 == 0 && $0 <= 8192 }) else {
                throw UsageError("--size must be WxH with even numbers")
            }
            (width, height) = (parts[0], parts[1])
        case "--bitrate": bitrate = try parseRate(try reader.value(for: argument), option: argument)
        case "--stats": statsPath = try reader.value(for: argument)
        default: throw UsageError("demo: unknown option '\(argument)' (see streamer demo --help)")
        }
    }
    let fps = 30
    let frameCount = Int(seconds * Double(fps))
    let receiver = try MediaReceiver(config: MediaReceiverConfig(listen: SocketAddress(ip: "127.0.0.1", port: 0)!))
    let received = MutexBox<(complete: Int, bytes: Int)>((0, 0))
    let receiverDone = DispatchSemaphore(value: 0)
    startDetachedThread {
        try? receiver.run(frameLimit: frameCount) { unit in
            let old = received.get()
            received.set((old.complete + (unit.isComplete ? 1 : 0), old.bytes + unit.annexB.count))
        }
        receiverDone.signal()
    }
    var config = MediaSenderConfig(destination: receiver.localAddress)
    config.paceBitsPerSecond = bitrate * 1.5
    let sender = try MediaSender(config: config)
    let source = LiveSource { printError(sourceStallLine($0)) }
    let stopFlag = MutexBox<Bool>(false)
    let intact = MutexBox<Bool>(false)
    let statsFile = statsPath
    let report = FinalReport {
        let (s, r) = (sender.stats, receiver.stats)
        intact.set(printDemoSummary(sender: s, receiver: r))
        if let statsFile { try writeJSON(demoStatsObject(sender: s, receiver: r), to: statsFile) }
    }
    let trap = SignalTrap(finalReport: report) { stopFlag.set(true); sender.finish() }
    print("demo: encoding \(frameCount) frames of \(width)x\(height) at \(fps) fps (x265 ultrafast, \(Int(bitrate / 1000)) kbit/s), sending to \(receiver.localAddress) through io_uring")
    source.start(.synthetic(width: width, height: height), frameRate: fps, bitrateKbps: Int(bitrate / 1000),
                 frameLimit: frameCount, sink: sender, shouldStop: { stopFlag.get() })
    source.waitUntilReady()
    if let failure = source.failure { printError("streamer demo: \(failure)"); return 1 }
    try sender.run()
    // Stopped by a signal, the receiver will not see all `frameCount` frames: what was sent
    // is on loopback, so a short wait is enough.
    if receiverDone.wait(timeout: .now() + (stopFlag.get() ? 0.5 : 5)) == .timedOut { receiver.stop(); receiverDone.wait() }
    withExtendedLifetime(trap) {}
    try report.write()
    return intact.get() ? 0 : 1
}

/// Prints what went out and came in; returns whether every frame arrived complete.
private func printDemoSummary(sender s: SenderStats, receiver r: ReceiverStats) -> Bool {
    let ecn = "Not-ECT \(r.ecn[0]), ECT(0) \(r.ecn[2]), ECT(1) \(r.ecn[1]), CE \(r.ecn[3])"
    let dscp = r.dscp.indices.filter { r.dscp[$0] > 0 }.map { "\($0): \(r.dscp[$0])" }.joined(separator: ", ")
    print("""
    sent:     \(s.framesSent) frames (\(s.keyframes) keyframes), \(s.packetsSent) datagrams, \(s.bytesSent) bytes
              largest datagram \(s.datagramSize) B (MTU \(s.pathMTU), \(s.mtuSource)); DSCP \(s.dscp), ECN \(s.ecn)
              \(s.batches) submissions, \(s.sendCalls) sends (\(s.gsoSends) GSO), \(s.enterCalls) io_uring_enter calls, paced at \(Int(s.pacingRate / 1000)) kbit/s
    received: \(r.framesComplete) complete + \(r.framesIncomplete) incomplete frames, \(r.received) datagrams, \(r.bytesReceived) bytes
              lost \(r.lost), late \(r.late), duplicate \(r.duplicate), reordered \(r.reordered)
              ECN: \(ecn); DSCP: \(dscp)
    """)
    let intact = r.framesComplete == s.framesSent && r.received == s.packetsSent && r.lost == 0
    print(intact ? "demo: every frame arrived complete" : "demo: NOT every frame arrived complete")
    return intact
}
