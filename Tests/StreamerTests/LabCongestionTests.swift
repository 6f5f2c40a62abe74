import Foundation
import Glibc
import Testing

/// Congestion control across the lab: a source three times the capacity of a 2 Mbit/s `tbf`
/// bottleneck (200 ms of queue), once with `--cc off` (a 6 Mbit/s clip recorded first, so the
/// load offered does not depend on x265 keeping real time on a busy machine) and once with
/// `--cc on` (x265 live, whose bitrate the controller sets).
@Suite(.enabled(if: isRoot && hasNft && uringEnabled, "needs root, nftables and io_uring (CI has them)"))
struct LabCongestionTests {
    static let seconds = 14
    static let capacity = 2_000_000.0

    /// Streams for `seconds` from `source` with `sendArguments`; returns both stats objects, the tbf drops
    /// during the run, and the frames ffprobe decodes from what the receiver wrote (nil without ffprobe).
    func stream(_ lab: Lab, source: [String], _ sendArguments: [String]) throws
        -> (send: [String: Any], recv: [String: Any], dropped: Int, decoded: Int?, senderSeconds: Double) {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("cce-lab")
        defer { try? FileManager.default.removeItem(at: directory) }
        let before = try #require(try lab.counters()["tbfDropped"])
        let out = directory.appendingPathComponent("x.hevc").path
        let receiver = try lab.spawn("rcv", binary, [
            "recv", "--listen", "5004", "--duration", String(Self.seconds + 60), "--quiet", "--out", out,
            "--stats", directory.appendingPathComponent("recv.json").path,
        ])
        try lab.waitUntilBound("rcv", port: 5004)
        let started = Date()
        let sender = try lab.spawn("snd", binary, [
            "send", "--to", "10.77.2.2:5004", "--duration", String(Self.seconds),
            "--quiet", "--stats", directory.appendingPathComponent("send.json").path,
        ] + source + sendArguments)
        #expect(waitForExit(sender, seconds: Double(Self.seconds) + 20) == 0)
        let senderSeconds = Date().timeIntervalSince(started)
        // It has all there will be; stopped here (its --duration is only a cap: a loaded machine
        // runs the sender well past its 14 s), its stats written on the way out.
        _ = waitForExit(receiver, seconds: 0.5)
        let dropped = try #require(try lab.counters()["tbfDropped"]) - before
        return (try readJSON(directory.appendingPathComponent("send.json")),
                try readJSON(directory.appendingPathComponent("recv.json")), dropped, try probeDecodedFrames(out)?.frames,
                senderSeconds)
    }

    /// Without congestion control the bottleneck drops what exceeds it and nearly every frame
    /// breaks; with it, the router drops at most a tenth as much (measured: none), the rate
    /// received stays within the capacity and uses a fair share of it, and the receiver's
    /// frames decode.
    @Test func congestionControlKeepsTheBottleneckFromDropping() throws {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("cce-clip")
        defer { try? FileManager.default.removeItem(at: directory) }
        let clip = try recordClip(binary, into: directory, size: "640x360", bitrate: "6M", frames: Self.seconds * 30)
        let lab = try Lab(name: "cceb", up: ["--rate", "2mbit", "--queue", "50000"])
        // The clip at its 30 fps, paced as x265 live at 6 Mbit/s would be (1.5 x its bitrate).
        let off = try stream(lab, source: ["--source", clip.path, "--fps", "30", "--pace", "9M"], ["--cc", "off"])
        let on = try stream(lab, source: ["--size", "640x360", "--bitrate", "6M"], ["--cc", "on"])
        let receivedRate = { (recv: [String: Any]) in Double(intField(recv, "bytes.received") ?? 0) * 8 / Double(Self.seconds) }
        print("""
            cc off: tbf dropped \(off.dropped), received \(receivedRate(off.recv) / 1e6) Mbit/s, \
            frames complete \(intField(off.recv, "frames.complete") ?? -1), packets sent \(intField(off.send, "packets.sent") ?? -1) \
            received \(intField(off.recv, "packets.received") ?? -1) late \(intField(off.recv, "packets.late") ?? -1) \
            lost \(intField(off.recv, "packets.lost") ?? -1), sender seconds \(off.senderSeconds); \
            cc on: tbf dropped \(on.dropped), lost (sender, receiver) \(intField(on.send, "packets.lost") ?? -1), \
            \(intField(on.recv, "packets.lost") ?? -1), kernel drops \(intField(on.recv, "kernelDrops") ?? -1), \
            received \(receivedRate(on.recv) / 1e6) Mbit/s, \
            frames complete \(intField(on.recv, "frames.complete") ?? -1), dropped whole at the sender \
            \(intField(on.send, "cc.framesDropped") ?? -1), rate changes \(intField(on.send, "cc.rateChanges") ?? -1), \
            bottleneck rate \(intField(on.send, "cc.bottleneckRateBps") ?? -1) bit/s, \
            sender seconds \(on.senderSeconds)
            """)
        // The source offers three times the capacity: without control the queue overflows.
        #expect(off.dropped > 500, "cc off: \(off.dropped) dropped")
        #expect(field(off.send, "cc.enabled") as? Bool == false && field(on.send, "cc.enabled") as? Bool == true)
        #expect(on.dropped * 10 <= off.dropped, "cc on dropped \(on.dropped), off \(off.dropped)")
        // Every loss the sender counts is the router's (the controller heard of each).
        #expect(intField(on.send, "packets.lost") == on.dropped && intField(on.recv, "packets.lost") == on.dropped)
        // Within the capacity and using it. tbf passes at most its rate over the time the stream
        // lasted, plus its queue (50,000 B) and its bucket (3,028 B: two 1,514 B frames, the lab's
        // `tbf_burst` at 2 Mbit/s); the payload counted is under the IP bytes tbf serves. The
        // stream lasted at most as long as the sender's process, which on a loaded machine is
        // longer than its 14 s (a late start, frames sent after their time): measured from spawn
        // to exit, never shorter than the 14 s.
        let span = max(Double(Self.seconds), on.senderSeconds)
        let received = Double(intField(on.recv, "bytes.received") ?? 0) * 8
        #expect(received <= Self.capacity * span + Double(50_000 + 3_028) * 8,
                "cc on received \(received) bit in a stream of at most \(span) s")
        #expect(receivedRate(on.recv) >= Self.capacity * 0.4, "cc on received \(receivedRate(on.recv)) bit/s")
        #expect((intField(on.send, "cc.rateChanges") ?? 0) > 0, "the target followed the path")
        // Alone on the path, every queue it met was its own: its competitive mode never began.
        #expect(field(on.send, "cc.competition.competing") as? Bool == false)
        #expect(intField(on.send, "cc.competition.entries") == 0)
        // The rate the controller saw the bottleneck deliver while a queue stood is the tbf's:
        // at most its 2 Mbit/s (the payload counted is under the frames tbf serves; a tenth over
        // for the receiver's timestamps, 1/1024 s in RFC 8888), at least four fifths of it (the
        // headers of 1,200-byte datagrams are 3 %).
        let bottleneck = Double(try #require(intField(on.send, "cc.bottleneckRateBps"), "no bottleneck rate measured"))
        #expect(bottleneck >= Self.capacity * 0.8 && bottleneck <= Self.capacity * 1.1,
                "bottleneck rate \(bottleneck) bit/s behind a \(Self.capacity) bit/s tbf")
        let completeOn = intField(on.recv, "frames.complete") ?? 0
        #expect(completeOn > (intField(off.recv, "frames.complete") ?? 0) && completeOn >= 30)
        if let decoded = on.decoded { #expect(decoded >= completeOn * 9 / 10, "ffprobe decoded \(decoded) of \(completeOn)") }
    }
}
