import Foundation
import Testing
import TestSupport
@testable import streamer

/// A `.hevc` file is paced from its own rate unless a pace is pinned (`SendConfiguration`,
/// `MediaSenderConfig.paceStreamMultiple`), and so a file far above `--bitrate`'s pace is
/// sent whole, at its time.
@Suite struct FilePaceTests {
    /// The flows' `paceStreamMultiple` and least pace for `arguments` (with a `.hevc` file or
    /// the synthetic source as `--source`).
    private func paces(_ arguments: [String], file: Bool = true) throws -> [(multiple: Double?, least: Double?)] {
        let directory = try temporaryDirectory("pace")
        defer { try? FileManager.default.removeItem(at: directory) }
        let clip = directory.appendingPathComponent("x.hevc")
        try Data([0, 0, 0, 1, 0x40, 0x01]).write(to: clip)
        let options = try SendOptions.parse(arguments + ["--source", file ? clip.path : "synthetic"])
        let configuration = try SendConfiguration(options)
        return configuration.flows.map { ($0.paceStreamMultiple, $0.paceBitsPerSecond) }
            + (configuration.rtsp.map { [($0.sender.paceStreamMultiple, $0.sender.paceBitsPerSecond)] } ?? [])
    }

    @Test func aFileFollowsItsRateUnlessAPaceIsPinned() throws {
        let followed = try paces(["--to", "127.0.0.1:5004"])
        #expect(followed.count == 1 && followed[0].multiple == 1.5 && followed[0].least == 6_000_000)
        #expect(try paces(["--rtsp", "127.0.0.1:8554"]).map(\.multiple) == [1.5])
        // Pinned for every flow, or for one: that flow keeps its pace as given.
        #expect(try paces(["--to", "127.0.0.1:5004", "--pace", "20M"]).map(\.multiple) == [nil])
        let mixed = try paces(["--to", "127.0.0.1:5004,pace=20M", "--to", "127.0.0.1:5006"])
        #expect(mixed.map(\.multiple) == [nil, 1.5] && mixed[0].least == 20_000_000)
        // Unpaced (--fast), or paced by the controller (--cc on): nothing to follow.
        #expect(try paces(["--to", "127.0.0.1:5004", "--fast"]).map(\.multiple) == [nil])
        #expect(try paces(["--to", "127.0.0.1:5004", "--cc", "on"]).map(\.multiple) == [nil])
        // An encoder's stream is at --bitrate: its pace stays 1.5 x that.
        #expect(try paces(["--to", "127.0.0.1:5004", "--cc", "off"], file: false).map(\.multiple) == [nil])
    }

    /// A clip played at 8 x its frame rate (about 4 x the default pace of 6 Mbit/s) with no
    /// `--pace`: every frame sent and received complete, nothing dropped for a full queue (at the
    /// default pace alone about half the frames were), and the pace the sender reports is above
    /// 1.5 x the clip's rate.
    @Test(.enabled(if: uringEnabled, "io_uring is disabled here"))
    func aFileAboveTheDefaultPaceIsSentWhole() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("filepace")
        defer { try? FileManager.default.removeItem(at: directory) }
        let frames = 480, fps = 240
        let clip = try recordClip(binary, into: directory, size: "320x240", bitrate: "3M", frames: frames)
        let clipBytes = try #require(try FileManager.default.attributesOfItem(atPath: clip.path)[.size] as? Int)
        let clipRate = Double(clipBytes) * 8 * Double(fps) / Double(frames)
        try #require(clipRate > 2 * 6_000_000, "the clip (\(clipRate) bit/s at \(fps) fps) is not above the default pace")

        let port = Int(nextPortPair())
        let receiver = Process()
        receiver.executableURL = URL(fileURLWithPath: binary)
        receiver.arguments = ["recv", "--listen", "127.0.0.1:\(port)", "--frames", String(frames), "--quiet",
                              "--stats", directory.appendingPathComponent("recv.json").path]
        receiver.standardError = FileHandle.nullDevice
        try receiver.run()
        try waitUntilBound(port: UInt16(port))
        let sendStats = directory.appendingPathComponent("send.json")
        let sent = try run(binary, ["send", "--to", "127.0.0.1:\(port)", "--source", clip.path, "--fps", String(fps),
                                    "--quiet", "--stats", sendStats.path])
        #expect(sent.status == 0, "send: \(sent.stderr)")
        #expect(waitForExit(receiver, seconds: 30) == 0)
        let send = try readJSON(sendStats)
        let recv = try readJSON(directory.appendingPathComponent("recv.json"))
        #expect(intField(send, "frames.sent") == frames)
        #expect(intField(send, "frames.droppedQueueFull") == 0)
        #expect(intField(recv, "frames.complete") == frames)
        #expect(intField(recv, "packets.received") == intField(send, "packets.sent"))
        let pace = try #require(field(send, "pacing.rateBps") as? Double)
        // The NAL bytes' rate, without the start codes the file has and the wire has not: 1.5 x
        // at least 90 % of the file's.
        #expect(pace >= 1.5 * 0.9 * clipRate, "paced at \(pace) bit/s, the clip is \(clipRate) bit/s")
    }
}
