import Foundation
import Testing
import TestSupport
@testable import streamer

/// `streamer send --cc`, `--min-bitrate`, `--max-bitrate`, `--start-bitrate`, `--cc-compete`,
/// `--print-rate-changes` and the `cc` stats.
@Suite struct CongestionCommandTests {
    @Test(arguments: [
        (["--cc", "maybe"], "--cc: 'maybe' is not one of on, off"),
        (["--cc", "on", "--no-feedback"], "--cc on"),
        (["--min-bitrate", "fast"], "--min-bitrate"),
        (["--max-bitrate", "0"], "--max-bitrate"),
        (["--start-bitrate", "-1M"], "--start-bitrate"),
        (["--min-bitrate", "3M", "--max-bitrate", "2M"], "--min-bitrate: 3M is above the maximum 2M"),
        (["--start-bitrate", "5M", "--max-bitrate", "2M"], "--start-bitrate: 5M is not within 150k..2M"),
        (["--start-bitrate", "100k", "--min-bitrate", "200k"], "--start-bitrate: 100k is not within 200k..4M"),
        (["--cc", "off", "--max-bitrate", "2M"], "--max-bitrate: only with congestion control"),
        (["--no-feedback", "--min-bitrate", "1M"], "--min-bitrate: only with congestion control"),
        (["--cc-compete", "sometimes"], "--cc-compete: 'sometimes' is not one of on, off"),
        (["--cc", "off", "--cc-compete", "off"], "--cc-compete: only with congestion control"),
    ])
    func badCongestionOptionsExitTwoWithOneLine(options: [String], mentions: String) throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let outcome = try run(binary, ["send", "--to", "127.0.0.1:5004"] + options)
        #expect(outcome.status == 2)
        #expect(outcome.stderrLines.count == 1, "stderr: \(outcome.stderr)")
        #expect(outcome.stderr.contains(mentions), "stderr: \(outcome.stderr)")
    }

    /// The controller starts at a quarter of `--bitrate` (at least 1M, within min..max) and the
    /// encoder opens there; a receiver without per-packet reports gets `--bitrate`.
    @Test func theDefaultStartIsAQuarterOfTheBitrate() throws {
        func rates(_ arguments: [String]) throws -> (encoderKbps: Int, start: Int?, withoutFeedback: Int?) {
            let configuration = try SendConfiguration(SendOptions.parse(["--to", "127.0.0.1:5004"] + arguments))
            guard case .scream(let scream)? = configuration.flows.first?.congestionControl else {
                return (configuration.bitrateKbps, nil, nil)
            }
            return (configuration.bitrateKbps, scream.startBitrate, configuration.flows.first?.targetBitrateWithoutFeedback)
        }
        #expect(try rates(["--bitrate", "8M"]) == (2_000, 2_000_000, 8_000_000))
        #expect(try rates(["--bitrate", "2M"]) == (1_000, 1_000_000, 2_000_000))
        #expect(try rates(["--bitrate", "600k"]) == (600, 600_000, 600_000))
        #expect(try rates(["--bitrate", "8M", "--min-bitrate", "3M"]) == (3_000, 3_000_000, 8_000_000))
        #expect(try rates(["--bitrate", "8M", "--start-bitrate", "5M"]) == (5_000, 5_000_000, 8_000_000))
        #expect(try rates(["--bitrate", "8M", "--max-bitrate", "4M"]) == (2_000, 2_000_000, 4_000_000))
        // Without a controller the encoder opens at --bitrate.
        #expect(try rates(["--bitrate", "8M", "--cc", "off"]) == (8_000, nil, nil))
    }

    /// Not with RTSP (its clients send no per-packet feedback), and the bitrates of a `.hevc`
    /// file or with a pinned `--pace` need `--cc on` (off by default there).
    @Test func congestionOptionsRefusedWhereTheyCannotWork() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        // A file that passes `--source`'s readability check (the options are refused before it is read).
        let directory = try temporaryDirectory("cce-refuse")
        defer { try? FileManager.default.removeItem(at: directory) }
        let dummyHEVC = directory.appendingPathComponent("dummy.hevc").path
        _ = FileManager.default.createFile(atPath: dummyHEVC, contents: Data([0, 0, 0, 1, 0x40, 0x01]))
        for (arguments, mentions) in [
            (["send", "--rtsp", "8554", "--cc", "on"], "--cc on: not with --rtsp"),
            (["send", "--rtsp", "8554", "--max-bitrate", "2M"], "--max-bitrate: only with congestion control"),
            (["send", "--to", "127.0.0.1:5004", "--source", dummyHEVC, "--max-bitrate", "2M"], "add --cc on"),
            (["send", "--to", "127.0.0.1:5004", "--pace", "3M", "--max-bitrate", "2M"], "add --cc on"),
        ] {
            let outcome = try run(binary, arguments)
            #expect(outcome.status == 2, "\(arguments)")
            #expect(outcome.stderrLines.count == 1 && outcome.stderr.contains(mentions), "stderr: \(outcome.stderr)")
        }
    }

    /// On loopback: a synthetic source has congestion control by default; its target starts at
    /// `--start-bitrate`, stays within min..max, goes to the encoder, and each change is one line
    /// on stderr with `--print-rate-changes` (as many as `cc.rateChanges`). The file it
    /// produced, sent again as a `.hevc` source, has none by default and obeys one with `--cc on`;
    /// every frame arrives each time.
    @Test(.enabled(if: uringEnabled, "io_uring is disabled here"))
    func congestionControlDefaultsAndStats() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("cce-cli")
        defer { try? FileManager.default.removeItem(at: directory) }
        let clip = directory.appendingPathComponent("clip.hevc").path

        let live = try sendAcrossLoopback(binary, directory, frames: 60, out: clip, options: [
            "--size", "320x240", "--min-bitrate", "300k", "--start-bitrate", "500k", "--max-bitrate", "3M",
            "--print-rate-changes", "--stats-every", "0.2",
            "--stats-series", directory.appendingPathComponent("series.jsonl").path])
        #expect(live.send.status == 0, "send: \(live.send.stderr)")
        #expect(intField(live.stats, "frames.sent") == 60 && intField(live.received, "frames.complete") == 60)
        #expect(field(live.stats, "cc.enabled") as? Bool == true && field(live.stats, "cc.controller") as? String == "scream")
        let target = try #require(intField(live.stats, "cc.targetBitrateBps"))
        #expect((300_000...3_000_000).contains(target), "target \(target)")
        let changes = try #require(intField(live.stats, "cc.rateChanges"))
        let lines = live.send.stderrLines.filter { $0.contains("target bitrate") }
        #expect(lines.count == changes, "stderr: \(live.send.stderr)")
        #expect(changes == 0 || intField(live.stats, "cc.encoderTargetBps") != 500_000, "the encoder followed")
        for key in ["windowBytes", "bytesInFlight", "pacingRateBps", "bottleneckRateBps", "queueDelayMs", "ceFraction", "framesDropped",
                    "encoderReconfigs", "encoderReopens", "active", "competition.competing", "competition.entries",
                    "competition.probes", "competition.exits"] {
            #expect(field(live.stats, "cc." + key) != nil, "cc.\(key) missing")
        }
        // The series: one line per 0.2 s, each a stats object at its time, the last the final stats.
        let series = try String(contentsOf: directory.appendingPathComponent("series.jsonl"), encoding: .utf8)
            .split(separator: "\n").compactMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let times = series.compactMap { $0["t"] as? Double }
        #expect(series.count >= 5 && times.count == series.count && times == times.sorted(), "\(times)")
        #expect(series.allSatisfy { field($0, "cc.targetBitrateBps") is Int })
        #expect(intField(series.last ?? [:], "frames.sent") == 60)
        let flow = try #require((live.stats["flows"] as? [[String: Any]])?.first)
        #expect(intField(flow, "cc.targetBitrateBps") == target, "every flow has its own cc object")

        let file = try sendAcrossLoopback(binary, directory, frames: 60, out: nil, options: ["--source", clip])
        #expect(file.send.status == 0, "send: \(file.send.stderr)")
        #expect(field(file.stats, "cc.enabled") as? Bool == false)
        #expect(intField(file.received, "frames.complete") == 60)

        let paced = try sendAcrossLoopback(binary, directory, frames: 60, out: nil,
                                           options: ["--source", clip, "--cc", "on", "--max-bitrate", "20M",
                                                     "--cc-compete", "off"])
        #expect(paced.send.status == 0, "send: \(paced.send.stderr)")
        #expect(field(paced.stats, "cc.enabled") as? Bool == true && field(paced.stats, "cc.active") as? Bool == true)
        #expect(intField(paced.received, "frames.complete") == intField(paced.stats, "frames.sent"))
        #expect(intField(paced.stats, "frames.sent")! + intField(paced.stats, "cc.framesDropped")! == 60)
        #expect(intField(paced.stats, "cc.competition.entries") == 0)
    }

    /// Runs `streamer recv` and `streamer send --frames N` with `options` on loopback; returns
    /// send's outcome and both stats objects.
    private func sendAcrossLoopback(_ binary: String, _ directory: URL, frames: Int, out: String?, options: [String])
        throws -> (send: Outcome, stats: [String: Any], received: [String: Any]) {
        let port = Int(nextPortPair())
        let sendStats = directory.appendingPathComponent("send-\(port).json")
        let recvStats = directory.appendingPathComponent("recv-\(port).json")
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: binary)
        receiver.arguments = ["recv", "--listen", "127.0.0.1:\(port)", "--frames", String(frames), "--quiet",
                              "--stats", recvStats.path] + (out.map { ["--out", $0] } ?? [])
        receiver.standardError = FileHandle.nullDevice
        try receiver.run()
        try waitUntilBound(port: UInt16(port))
        let sent = try run(binary, ["send", "--to", "127.0.0.1:\(port)", "--frames", String(frames), "--quiet",
                                    "--stats", sendStats.path] + options)
        waitForExit(receiver, seconds: 20)
        return (sent, try readJSON(sendStats), try readJSON(recvStats))
    }
}
