import Foundation
import Testing

/// Runs the built `bench peers --quick` and checks, from its peers.json, that every sender
/// present (the floor, and streamer, GStreamer, FFmpeg where installed) delivered every RTP
/// packet it sent to the counter in real time and exited cleanly, that the fast rounds ran
/// (`streamer send --fast` among them), that a `--compare` binary (this build's streamer
/// again) got its own rows, and that the x265 live rows delivered every packet, streamer's and
/// the floor's, with the encoder's CPU counted. Never asserts on CPU figures.
@Suite struct PeersBenchTests {
    static var ffmpegPresent: Bool {
        (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":")
            .contains { FileManager.default.isExecutableFile(atPath: "\($0)/ffmpeg") }
    }

    @Test(.enabled(if: ffmpegPresent, "ffmpeg (needed to make the test file) is not installed"))
    func quickRunDeliversEveryPacket() throws {
        let binary = try #require(BenchSmokeTests.benchBinary(), "bench binary not found; run swift build --product bench")
        let streamer = binary.deletingLastPathComponent().appendingPathComponent("streamer")
        let compare = FileManager.default.isExecutableFile(atPath: streamer.path)
        let (status, json) = try BenchRun.report(binary, ["peers", "--quick"] + (compare ? ["--compare", "again=\(streamer.path)"] : []),
                                                 file: "peers.json")
        #expect(status == 0, "bench peers exited with \(status)")
        let packets = try #require(json["packets"] as? Int)
        #expect(packets > 0)
        let senders = try #require(json["senders"] as? [[String: Any]])
        let names = senders.compactMap { "\($0["sender"] ?? "?") \($0["mode"] ?? "?")" }
        for expected in ["floor realtime", "ffmpeg realtime", "floor fast", "ffmpeg fast"]
            + (compare ? ["again realtime", "streamer fast", "again fast"] : []) {
            #expect(names.contains(expected), "senders: \(names)")
        }
        for sender in senders {
            let name = "\(sender["sender"] ?? "?") \(sender["mode"] ?? "?")"
            let delivered = sender["delivered"] as? [Int] ?? []
            let sent = sender["sent"] as? [Int] ?? []
            #expect(!delivered.isEmpty, "\(name): no round")
            if sender["mode"] as? String == "fast" {
                // As fast as it goes: the counter may fall behind; what it counted is reported.
                #expect(zip(delivered, sent).allSatisfy { $0 > 0 && $0 <= $1 }, "\(name): delivered \(delivered), sent \(sent)")
            } else {
                #expect(delivered == sent, "\(name): delivered \(delivered), sent \(sent)")
            }
            #expect(sent.allSatisfy { $0 > 0 }, "\(name): nothing sent")
            #expect((sender["exit"] as? [Int] ?? [1]).allSatisfy { $0 == 0 }, "\(name): exit \(sender["exit"] ?? "?")")
            // One ratio to the floor per round, each the round's own pair (the floor's are 1).
            let byRound = sender["ratioToFloorByRound"] as? [Double] ?? []
            #expect(byRound.count == delivered.count && byRound.allSatisfy { $0 > 0 }, "\(name): by round \(byRound)")
            if sender["sender"] as? String == "floor" {
                // The floor sends the file's packetization as it is.
                #expect(sent.allSatisfy { $0 == packets }, "\(name): \(sent) of \(packets)")
                #expect(byRound.allSatisfy { $0 == 1 }, "\(name): by round \(byRound)")
            }
        }
        // x265 live (streamer encoding at 30 fps, from y4m and synthetic), beside the floor sending
        // what it recorded: every packet delivered on both sides, the encoder's CPU counted.
        let live = json["x265Live"] as? [[String: Any]] ?? []
        if compare {
            #expect(Set(live.compactMap { $0["source"] as? String }) == ["y4m", "synthetic"], "x265Live: \(live)")
        }
        for row in live {
            let name = "x265 \(row["source"] ?? "?")"
            let delivered = row["delivered"] as? [Int] ?? [], sent = row["sent"] as? [Int] ?? []
            #expect(!delivered.isEmpty && delivered == sent && sent.allSatisfy { $0 > 0 }, "\(name): delivered \(delivered), sent \(sent)")
            let floorDelivered = row["floorDelivered"] as? [Int] ?? [], floorSent = row["floorSent"] as? [Int] ?? []
            #expect(!floorDelivered.isEmpty && floorDelivered == floorSent, "\(name) floor: \(floorDelivered) of \(floorSent)")
            #expect(((row["exit"] as? [Int] ?? [1]) + (row["floorExit"] as? [Int] ?? [1])).allSatisfy { $0 == 0 }, "\(name): \(row)")
            #expect((row["encoderNs"] as? [Int] ?? []).allSatisfy { $0 > 0 }, "\(name): \(row)")
        }
        // The receivers, fed by the floor sender in real time: the floor counter counts every
        // packet, and the counter rebuilding frames by hand and streamer recv complete every
        // frame of the file (GStreamer and FFmpeg only run).
        let frames = try #require(json["frames"] as? Int)
        let receivers = try #require(json["receivers"] as? [[String: Any]])
        func receiver(_ name: String, _ mode: String) -> [String: Any]? {
            receivers.first { $0["receiver"] as? String == name && $0["mode"] as? String == mode }
        }
        let floor = try #require(receiver("floor", "realtime"))
        #expect((floor["delivered"] as? [Int] ?? []).allSatisfy { $0 == packets }, "floor receiver: \(floor)")
        // Fed as fast as the floor sender goes, a receiver may miss packets: only that the rows exist.
        let fastFloor = try #require(receiver("floor", "fast"))
        #expect((fastFloor["delivered"] as? [Int] ?? []).allSatisfy { $0 > 0 && $0 <= packets }, "fast floor receiver: \(fastFloor)")
        #expect(receiver("ffmpeg", "fast") != nil)
        for name in ["by-hand", "streamer"] + (compare ? ["again"] : []) {
            guard let streamer = receiver(name, "realtime") else {
                #expect(!compare && name != "by-hand", "no \(name) receiver row")
                continue
            }
            let decoded = streamer["decodedFrames"] as? [Int] ?? []
            #expect(!decoded.isEmpty && decoded.allSatisfy { $0 == frames }, "\(name) recv: \(decoded) of \(frames) frames")
            #expect((streamer["exit"] as? [Int] ?? [1]).allSatisfy { $0 == 0 })
        }
    }

    /// A `--compare` path that is not an executable is refused with one line and a non-zero
    /// exit, before anything is encoded or sent.
    @Test func compareWithoutExecutableIsRefused() throws {
        let binary = try #require(BenchSmokeTests.benchBinary(), "bench binary not found; run swift build --product bench")
        let (status, _, text) = try BenchRun.output(binary, ["peers", "--compare", "old=/nonexistent/streamer"])
        #expect(status != 0)
        #expect(text.contains("/nonexistent/streamer is not an executable"), "stderr: \(text)")
    }
}
