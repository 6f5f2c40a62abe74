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
    }
}
