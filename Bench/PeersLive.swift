import Foundation
import Glibc

// bench peers, x265 live rows: `streamer send` encoding 1280x720 at 30 fps with x265 (from a
// y4m file ffmpeg writes, and from its synthetic source) to the same counter, its whole-process
// CPU split into the encoder's (`cpu.encoderSeconds` of its --stats) and everything else, beside
// the floor sender sending the same packets (what streamer sent, saved with --record and
// packetized as the file rows are) at 30 fps.

/// The frame rate of the x265 live rows (issue 15's target: "with x265 at 30 fps").
let liveFrameRate = 30

/// One x265 live round: streamer's run, the encoder's CPU in it, and the floor sending what
/// streamer recorded.
struct LiveRound {
    var source: String
    var streamer: PeerRound
    var encoderNanoseconds: Int64
    var floor: PeerRound

    var encoderPerPacket: Double { Double(encoderNanoseconds) / Double(max(streamer.packets, 1)) }
    /// Everything but the encoder, per packet.
    var restPerPacket: Double { streamer.nanosecondsPerPacket - encoderPerPacket }
}

/// What the x265 live rows add to the report.
struct LiveReport {
    var title = ""
    var table = ""
    var csv = "source,round,packets,sent,exit,userNs,systemNs,encoderNs,floorPackets,floorExit,floorUserNs,floorSystemNs\n"
    var json: [[String: Any]] = []
}

/// Runs the x265 live rounds (a warm-up, then `options.repeatCount`, sources interleaved):
/// `frames` frames of 1280x720 at 30 fps, x265 at 5 Mbit/s (the test file's bytes per frame:
/// `--fps` / 6 Mbit/s at `--fps`), y4m written by ffmpeg and synthetic.
func measureLive(floor: String, streamer: String, ffmpeg: String, frames: Int, options: PeersOptions,
                 directory: String, port: inout Int) throws -> LiveReport {
    let y4m = directory + "/live.y4m"
    progress("writing \(frames) frames of 1280x720 y4m for the x265 live rows")
    let writer = waitChild(try spawnChild([ffmpeg, "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                                           "testsrc2=size=1280x720:rate=\(liveFrameRate)", "-frames:v", "\(frames)",
                                           "-pix_fmt", "yuv420p", "-f", "yuv4mpegpipe", y4m]))
    guard writer.status == 0 else { throw BenchError.runtime("ffmpeg could not write the y4m file") }
    defer { try? FileManager.default.removeItem(atPath: y4m) }
    let sources: [(name: String, arguments: [String])] = [
        ("y4m", ["--source", y4m]),
        ("synthetic", ["--source", "synthetic", "--size", "1280x720"]),
    ]
    var rounds: [LiveRound] = []
    for round in 0...options.repeatCount {  // round 0 warms up
        for source in sources {
            let base = directory + "/live-\(source.name)"
            let send = PeerSender(name: "streamer", mode: "x265-\(source.name)", argv: {
                [streamer, "send", "--to", "127.0.0.1:\($0)"] + source.arguments
                    + ["--fps", "\(liveFrameRate)", "--frames", "\(frames)", "--bitrate", "5M", "--no-feedback", "--cc", "off",
                       "--pace", "2G", "--mtu", "1428", "--quiet", "--stats", base + ".json", "--record", base + ".hevc"]
            }, exact: false)
            let sent = try measureSender(send, floor: floor, packets: 0, directory: directory, port: &port)
            let stats = FileManager.default.contents(atPath: base + ".json")
                .flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
            let encoderSeconds = (stats?["cpu"] as? [String: Any])?["encoderSeconds"] as? Double ?? 0
            let (_, packets) = try writeFloorRecords(hevc: base + ".hevc", to: base + ".rtp", frameRate: liveFrameRate)
            let floorSender = PeerSender(name: "floor", mode: send.mode, argv: {
                [floor, "send", base + ".rtp", "\($0)", "\(liveFrameRate)"]
            }, exact: true)
            let floor = try measureSender(floorSender, floor: floor, packets: packets, directory: directory, port: &port)
            let live = LiveRound(source: source.name, streamer: sent, encoderNanoseconds: Int64(encoderSeconds * 1e9), floor: floor)
            progress(String(format: "round %d x265 %@: %d of %d packets, exit %d, %.2f µs/packet (encoder %.2f, the rest %.2f); "
                            + "floor %d of %d packets, %.2f µs/packet", round, source.name, sent.packets, sent.sent,
                            sent.cpu.status, sent.nanosecondsPerPacket / 1000, live.encoderPerPacket / 1000,
                            live.restPerPacket / 1000, floor.packets, floor.sent, floor.nanosecondsPerPacket / 1000))
            if round > 0 { rounds.append(live) }
        }
    }
    var report = LiveReport()
    report.title = "x265 live: streamer send encoding \(frames) frames of 1280x720 at \(liveFrameRate) fps (x265 ultrafast, "
        + "5 Mbit/s), beside the floor sender sending the packets streamer sent (its --record, floor packetization) at "
        + "\(liveFrameRate) fps; whole-process CPU per delivered packet, the encoder's from streamer's cpu.encoderSeconds, medians"
    report.table = "| source | sent | delivered | CPU µs/pkt | encoder µs/pkt | all but the encoder µs/pkt | floor µs/pkt | "
        + "all but the encoder × floor |\n|---|---|---|---|---|---|---|---|\n"
    for source in sources {
        let mine = rounds.filter { $0.source == source.name }
        let total = median(mine.map(\.streamer.nanosecondsPerPacket))
        let encoder = median(mine.map(\.encoderPerPacket))
        let rest = median(mine.map(\.restPerPacket))
        let floor = median(mine.map(\.floor.nanosecondsPerPacket))
        report.table += String(format: "| %@ | %d | %d | %.2f | %.2f | %.2f | %.2f | %.2f |\n", source.name,
                               mine.map(\.streamer.sent).min() ?? 0, mine.map(\.streamer.packets).min() ?? 0,
                               total / 1000, encoder / 1000, rest / 1000, floor / 1000, rest / floor)
        for (index, round) in mine.enumerated() {
            report.csv += "\(source.name),\(index + 1),\(round.streamer.packets),\(round.streamer.sent),\(round.streamer.cpu.status),"
                + "\(round.streamer.cpu.userNanoseconds),\(round.streamer.cpu.systemNanoseconds),\(round.encoderNanoseconds),"
                + "\(round.floor.packets),\(round.floor.cpu.status),\(round.floor.cpu.userNanoseconds),\(round.floor.cpu.systemNanoseconds)\n"
        }
        report.json.append([
            "source": source.name, "sent": mine.map(\.streamer.sent), "delivered": mine.map(\.streamer.packets),
            "exit": mine.map(\.streamer.cpu.status), "encoderNs": mine.map(\.encoderNanoseconds),
            "floorSent": mine.map(\.floor.sent), "floorDelivered": mine.map(\.floor.packets), "floorExit": mine.map(\.floor.cpu.status),
            "nsPerPacket": total, "encoderNsPerPacket": encoder, "restNsPerPacket": rest, "floorNsPerPacket": floor,
            "restRatioToFloor": rest / floor,
        ])
    }
    return report
}
