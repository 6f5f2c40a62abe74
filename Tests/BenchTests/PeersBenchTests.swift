import Foundation
import Testing

/// Runs the built `bench peers --quick` and checks, from its peers.json, that every sender
/// present (the floor, and streamer, GStreamer, FFmpeg where installed) delivered every RTP
/// packet it sent to the counter and exited cleanly. Never asserts on CPU figures.
@Suite struct PeersBenchTests {
    static var ffmpegPresent: Bool {
        (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":")
            .contains { FileManager.default.isExecutableFile(atPath: "\($0)/ffmpeg") }
    }

    @Test(.enabled(if: ffmpegPresent, "ffmpeg (needed to make the test file) is not installed"))
    func quickRunDeliversEveryPacket() throws {
        let binary = try #require(BenchSmokeTests.benchBinary(), "bench binary not found; run swift build --product bench")
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("bench-peers-\(getpid())")
        defer { try? FileManager.default.removeItem(at: out) }
        let process = Process()
        process.executableURL = binary
        process.arguments = ["peers", "--quick", "--out", out.path]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "bench peers exited with \(process.terminationStatus)")

        let data = try Data(contentsOf: out.appendingPathComponent("peers.json"))
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let packets = try #require(json["packets"] as? Int)
        #expect(packets > 0)
        let senders = try #require(json["senders"] as? [[String: Any]])
        let names = senders.compactMap { $0["sender"] as? String }
        #expect(names.contains("floor") && names.contains("ffmpeg"), "senders: \(names)")
        for sender in senders {
            let name = sender["sender"] as? String ?? "?"
            let delivered = sender["delivered"] as? [Int] ?? []
            let sent = sender["sent"] as? [Int] ?? []
            #expect(!delivered.isEmpty, "\(name): no round")
            #expect(delivered == sent, "\(name): delivered \(delivered), sent \(sent)")
            #expect(sent.allSatisfy { $0 > 0 }, "\(name): nothing sent")
            #expect((sender["exit"] as? [Int] ?? [1]).allSatisfy { $0 == 0 }, "\(name): exit \(sender["exit"] ?? "?")")
            if name == "floor" {
                // The floor sends the file's packetization as it is.
                #expect(delivered.allSatisfy { $0 == packets }, "\(name): \(delivered) of \(packets)")
            }
        }
        // The receivers, fed by the floor sender: the floor counter counts every packet and
        // streamer recv completes every frame of the file (GStreamer and FFmpeg only run).
        let frames = try #require(json["frames"] as? Int)
        let receivers = try #require(json["receivers"] as? [[String: Any]])
        let floor = try #require(receivers.first { $0["receiver"] as? String == "floor" })
        #expect((floor["delivered"] as? [Int] ?? []).allSatisfy { $0 == packets }, "floor receiver: \(floor)")
        if let streamer = receivers.first(where: { $0["receiver"] as? String == "streamer" }) {
            let decoded = streamer["decodedFrames"] as? [Int] ?? []
            #expect(!decoded.isEmpty && decoded.allSatisfy { $0 == frames }, "streamer recv: \(decoded) of \(frames) frames")
            #expect((streamer["exit"] as? [Int] ?? [1]).allSatisfy { $0 == 0 })
        }
    }
}
