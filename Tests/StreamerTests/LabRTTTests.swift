import Foundation
import Glibc
import Testing

/// The sender's RTT (RTCP LSR/DLSR) against `ping` between the same namespaces at the same time.
@Suite(.enabled(if: isRoot && hasNft && uringEnabled, "needs root, nftables and io_uring (CI has them)"))
struct LabRTTTests {
    func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.isEmpty ? .nan : sorted[sorted.count / 2]
    }

    /// Medians of the sender's RTT samples and of ping's, over the same 6 s of a stream.
    func measure(lab: Lab, bitrate: String, pace: String, size: String = "320x240") throws -> (engine: Double, ping: Double) {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("rtt")
        defer { try? FileManager.default.removeItem(at: directory) }
        let stats = directory.appendingPathComponent("send.json")
        let receiver = try lab.spawn("rcv", binary, ["recv", "--listen", "5004", "--duration", "14", "--quiet"])
        try lab.waitUntilBound("rcv", port: 5004)
        let sender = try lab.spawn("snd", binary, [
            "send", "--to", "10.77.2.2:5004", "--duration", "10", "--size", size, "--bitrate", bitrate,
            "--pace", pace, "--report-interval", "0.02", "--quiet", "--stats", stats.path, "--stats-every", "0.005",
        ])
        Thread.sleep(forTimeInterval: 2)
        // Ping (every 10 ms) and sample each of the sender's RTT samples (one per receiver report,
        // every 20 ms; told apart by their arrival times) over the same 5 s.
        let ping = Process()
        ping.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        ping.arguments = ["netns", "exec", "sl-\(lab.name)-snd", "ping", "-n", "-i", "0.01", "-c", "500", "10.77.2.2"]
        let pingOutput = Pipe()
        ping.standardOutput = pingOutput
        try ping.run()
        var engineSamples: [Double] = []
        var lastSeen: Double?
        while ping.isRunning {
            if let object = try? readJSON(stats), let rtt = field(object, "rttMs.last") as? Double,
               let at = field(object, "rttMs.lastAtUnix") as? Double, at != lastSeen {
                engineSamples.append(rtt)
                lastSeen = at
            }
            Thread.sleep(forTimeInterval: 0.004)
        }
        ping.waitUntilExit()
        let text = String(decoding: pingOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let pingSamples = text.split(separator: "\n").compactMap { line -> Double? in
            guard let range = line.range(of: "time=") else { return nil }
            return Double(line[range.upperBound...].split(separator: " ").first ?? "")
        }
        #expect(waitForExit(sender, seconds: 20) == 0)
        #expect(waitForExit(receiver, seconds: 20) == 0)
        try #require(engineSamples.count >= 5, "too few RTT samples: \(engineSamples)")
        try #require(pingSamples.count >= 250, "ping: \(text)")
        print("RTT medians: engine \(median(engineSamples)) ms (\(engineSamples.count) samples), ping \(median(pingSamples)) ms (\(pingSamples.count) samples)")
        return (median(engineSamples), median(pingSamples))
    }

    /// On an idle path the two agree within 1 ms.
    @Test func rttAgreesWithPingOnAnIdlePath() throws {
        let lab = try Lab(name: "rtti", up: [])
        let result = try measure(lab: lab, bitrate: "1M", pace: "1.5M")
        #expect(abs(result.engine - result.ping) <= 1.0, "engine \(result.engine) ms, ping \(result.ping) ms")
    }

    /// Behind a loaded tbf bottleneck (queueing delay grows) they still agree within 1 ms.
    @Test func rttAgreesWithPingThroughALoadedQueue() throws {
        let lab = try Lab(name: "rttq", up: ["--rate", "3mbit", "--queue", "30000"])
        // The stream offers more than the bottleneck takes: tbf's queue stays full.
        let result = try measure(lab: lab, bitrate: "4M", pace: "5M", size: "640x360")
        #expect(result.ping > 20, "the queue did not load: ping \(result.ping) ms")
        // The queue's delay swings by ~15 ms with every frame (a frame's burst at 5 Mbit/s into
        // 3 Mbit/s), so both medians need hundreds of samples. Sender reports leave at random
        // times from their own alarm; sent at pacer wake-ups (before a media batch) they saw the
        // low point of that swing and read 0.1-1.3 ms below ping.
        #expect(abs(result.engine - result.ping) <= 1.0, "engine \(result.engine) ms, ping \(result.ping) ms")
    }
}
