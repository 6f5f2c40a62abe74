import Foundation
import Glibc
import Testing

/// Whether tools/gst-rtx-peer can be built: pkg-config and GStreamer's development files.
let hasGStreamerDev = FileManager.default.isExecutableFile(atPath: "/usr/bin/pkg-config")
    && (try? run("/usr/bin/pkg-config", ["--exists", "gstreamer-1.0"]).status) == 0

/// GStreamer 1.22's RFC 4588 elements against ours, both ways, across the lab with nft loss on the
/// media port: tools/gst-rtx-peer (tools/gst-rtx-peer.c) attaches `rtprtxreceive` / `rtprtxsend`
/// to an AVPF rtpbin through its aux signals, which gst-launch cannot do. Both directions run
/// with retransmission and with `--no-rtx`; what the router dropped is compared with both ends'
/// counters.
@Suite(.serialized, .enabled(if: isRoot && hasNft && uringEnabled && gstLaunch != nil && hasGStreamerDev,
                             "needs root, nftables, io_uring, GStreamer and libgstreamer1.0-dev (CI has them)"))
struct LabGStreamerRTXTests {
    static let frames = 240

    /// Builds tools/gst-rtx-peer.c (cached in .build/tools) and returns the binary's path.
    func peerBinary() throws -> String {
        let outcome = try run(packageRoot.appendingPathComponent("tools/gst-rtx-peer").path, ["--build"], timeout: 120)
        #expect(outcome.status == 0, "gst-rtx-peer build: \(outcome.stderr)")
        return outcome.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The peer's KEY=VALUE lines.
    func peerCounts(_ text: String) -> [String: Int] {
        var counts: [String: Int] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1)
            if parts.count == 2, let value = Int(parts[1]) { counts[String(parts[0])] = value }
        }
        return counts
    }

    /// Starts the peer in `host` of the lab, its KEY=VALUE lines going to `output`.
    func spawnPeer(_ lab: Lab, _ host: String, _ arguments: [String], output: URL) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = ["netns", "exec", "sl-\(lab.name)-\(host)", try peerBinary()] + arguments
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// `loss` percent on the media port from the first to the fifth second of a stream of 8 s
    /// (240 frames at 30 fps, the sender started just now), then none: the last originals
    /// arrive, so every dropped original is a gap the receiver sees. Then waits for `processes`.
    func impairThenWait(_ lab: Lab, loss: Int, for processes: [Process]) throws {
        Thread.sleep(forTimeInterval: 1)
        try lab.set(["--loss", String(loss)])
        Thread.sleep(forTimeInterval: 4)
        try lab.set(["--loss", "0"])
        for process in processes { #expect(waitForExit(process, seconds: 40) == 0) }
    }

    /// The router's drops on the media port since `before`.
    func dropped(_ lab: Lab, since before: [String: Int]) throws -> Int {
        try lab.counters()["lossDropped", default: 0] - before["lossDropped", default: 0]
    }

    /// `streamer send` (RFC 4588 RTX on its own SSRC, PT 97) in snd to the GStreamer peer in
    /// rcv; `loss` percent of the media port's packets (originals and retransmissions) dropped
    /// for 4 s.
    /// Returns the sender's stats, the peer's counts, the frames ffmpeg decodes from the peer's
    /// depayloaded output, and the router's drops.
    func streamToGStreamer(lab: Lab, loss: Int, sendArguments: [String])
        throws -> (send: [String: Any], peer: [String: Int], decoded: Int, dropped: Int) {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("gst-rtx-recv")
        defer { try? FileManager.default.removeItem(at: directory) }
        let output = directory.appendingPathComponent("gst.hevc")
        let peerOutput = directory.appendingPathComponent("peer.txt")
        try lab.set(["--loss", "0"])
        let before = try lab.counters()
        // The peer ends 3 s after the last packet (up to 30 s for the first); its RTCP leaves
        // from the port it arrives on (5005) for our feedback socket (6001).
        let receiver = try spawnPeer(lab, "rcv", ["recv", "--port", "5004", "--rtcp-port", "5005", "--rtcp-host", "10.77.1.2",
                                                  "--rtcp-to", "6001", "--latency", "300", "--idle", "3", "--wait-first", "30",
                                                  "--output", output.path], output: peerOutput)
        let sendStats = directory.appendingPathComponent("send.json")
        let sender = try lab.spawnStreamToReceiver(binary, frames: Self.frames, stats: sendStats, sendArguments)
        try impairThenWait(lab, loss: loss, for: [sender, receiver])
        let counts = peerCounts(try String(contentsOf: peerOutput, encoding: .utf8))
        return (try readJSON(sendStats), counts, try ffmpegDecodedFrames(output.path), try dropped(lab, since: before))
    }

    /// GStreamer's rtpbin NACKs our stream, our RTX (own SSRC, PT 97) reaches its
    /// `rtprtxreceive`, which associates it with the media SSRC (RFC 4588 section 5.3: by the
    /// sequence number it asked for) and hands the restored packets to its jitter buffer.
    @Test func gstreamerReceivesOurRTXOnItsOwnSSRC() throws {
        let lab = try Lab(name: "rb1", up: ["--port", "5004"])
        let rtx = try streamToGStreamer(lab: lab, loss: 10, sendArguments: [])
        let plain = try streamToGStreamer(lab: lab, loss: 10, sendArguments: ["--no-rtx"])
        print("gstreamer rtprtxreceive: peer \(rtx.peer), router dropped \(rtx.dropped); send nack \(field(rtx.send, "nack") ?? "-") rtx \(field(rtx.send, "rtx") ?? "-"); decoded \(rtx.decoded) frames with RTX, \(plain.decoded) without (peer \(plain.peer), dropped \(plain.dropped))")
        func int(_ object: [String: Any], _ path: String) -> Int { intField(object, path) ?? -1 }
        let rtxSent = int(rtx.send, "rtx.sent")
        #expect(rtx.dropped > 0 && int(rtx.send, "nack.received") > 0 && rtxSent > 0)
        #expect(field(rtx.send, "nack.rejected.foreign") == nil)
        // Every datagram sent to the media port either crossed the router or was dropped there.
        let sent = int(rtx.send, "packets.sent") + rtxSent + (intField(rtx.send, "path.probes.sent") ?? 0)
        #expect(rtx.peer["packets"] == sent - rtx.dropped)
        // What rtprtxreceive saw with PT 97 is what we retransmitted less the router's drops of
        // it; it associated some of it with the media SSRC (those it had asked for).
        let rtxArrived = rtx.peer["rtx.packets"] ?? -1
        #expect(rtxArrived > 0 && rtxArrived <= rtxSent && rtxArrived >= rtxSent - rtx.dropped)
        #expect((rtx.peer["rtx.assoc_packets"] ?? 0) > 0 && (rtx.peer["rtx.assoc_packets"] ?? 0) <= rtxArrived)
        #expect((rtx.peer["rtx.requests"] ?? 0) > 0)
        #expect(int(plain.send, "rtx.sent") == 0 && plain.peer["rtx.assoc_packets"] == 0)
        // How many its jitter buffer took in time (`rtx-success-count`: 5 to 42 in five runs) and
        // the decoded frames with and without are measured, not asserted: its rtpsession holds
        // most NACKs for the next regular RTCP, drops those that expire, and sends the rest late,
        // for packets that have arrived meanwhile (most of our RTX are duplicates to it).
        #expect(rtx.decoded > 0 && plain.decoded > 0)
    }

    /// The GStreamer peer sends (x265enc, rtph265pay, `rtprtxsend` under an AVPF rtpbin) to
    /// `streamer recv` in rcv, `loss` percent dropped on the media port for 4 s. Returns our receiver's stats, the peer's counts and the drops.
    func gstreamerSends(lab: Lab, loss: Int, receiveArguments: [String], peerArguments: [String] = [])
        throws -> (recv: [String: Any], peer: [String: Int], dropped: Int) {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("gst-rtx-send")
        defer { try? FileManager.default.removeItem(at: directory) }
        try lab.set(["--loss", "0"])
        let before = try lab.counters()
        let receiveStats = directory.appendingPathComponent("recv.json")
        let receiver = try lab.spawn("rcv", binary, ["recv", "--listen", "5004", "--duration", "25", "--quiet",
                                                     "--stats", receiveStats.path] + receiveArguments)
        try lab.waitUntilBound("rcv", port: 5004)
        // Our feedback goes to the RTP source port + 1 (6001), where the peer reads RTCP.
        let peerOutput = directory.appendingPathComponent("peer.txt")
        let sender = try spawnPeer(lab, "snd", ["send", "--host", "10.77.2.2", "--port", "5004", "--bind-port", "6000",
                                                "--rtcp-to", "5005", "--rtcp-port", "6001", "--frames", "\(Self.frames)",
                                                "--width", "320", "--height", "240", "--fps", "30", "--kbps", "1000",
                                                "--linger", "2"] + peerArguments, output: peerOutput)
        try impairThenWait(lab, loss: loss, for: [sender, receiver])
        let counts = peerCounts(try String(contentsOf: peerOutput, encoding: .utf8))
        return (try readJSON(receiveStats), counts, try dropped(lab, since: before))
    }

    /// `streamer recv` NACKs the GStreamer sender, its `rtprtxsend` answers with RFC 4588 RTX
    /// on its own SSRC and PT 97, and our receiver takes it as the lost originals: the router's
    /// drops are exactly our lost originals plus the retransmissions that did not arrive.
    @Test func weTakeRTXFromGStreamersRtprtxsend() throws {
        let lab = try Lab(name: "rb2", up: ["--port", "5004"])
        let rtx = try gstreamerSends(lab: lab, loss: 10, receiveArguments: ["--latency", "300"])
        let plain = try gstreamerSends(lab: lab, loss: 10, receiveArguments: ["--no-rtx"])
        func int(_ object: [String: Any], _ path: String) -> Int { intField(object, path) ?? -1 }
        print("gstreamer rtprtxsend: peer \(rtx.peer), router dropped \(rtx.dropped); recv packets \(field(rtx.recv, "packets") ?? "-") rtx \(field(rtx.recv, "rtx") ?? "-") nack \(field(rtx.recv, "nack") ?? "-"); frames complete \(int(rtx.recv, "frames.complete")) with RTX, \(int(plain.recv, "frames.complete")) without (dropped \(plain.dropped))")
        let rtxSent = rtx.peer["rtx.packets"] ?? -1
        let received = int(rtx.recv, "rtx.received")
        #expect(rtx.dropped > 0 && int(rtx.recv, "nack.sent") > 0)
        #expect((rtx.peer["rtx.requests"] ?? 0) > 0 && rtxSent > 0 && received > 0)
        // What the router dropped was originals (our lost) or retransmissions (sent, not received).
        let lost = int(rtx.recv, "packets.lost")
        #expect(lost + rtxSent - received == rtx.dropped)
        #expect(int(rtx.recv, "packets.received") + lost + rtxSent == rtx.peer["packets"] ?? -1)
        let recovered = int(rtx.recv, "packets.recovered")
        #expect(recovered > 0 && recovered <= lost)
        #expect(recovered + int(rtx.recv, "rtx.late") + int(rtx.recv, "rtx.duplicate") <= received)
        #expect(field(rtx.recv, "rejected.foreignSSRC") == nil)
        // Without retransmission every drop is a lost original, and fewer frames are complete.
        #expect(int(plain.recv, "packets.lost") == plain.dropped && plain.peer["rtx.packets"] == 0)
        #expect(int(rtx.recv, "frames.complete") > int(plain.recv, "frames.complete"))
    }

    /// A sender whose RTX payload type is not our default (97): `recv --sdp` takes it from the
    /// SDP's `a=rtpmap:98 rtx/90000` (`a=fmtp:98 apt=96`), and the RTX on PT 98 is taken as
    /// the lost originals (without the SDP it would be a foreign SSRC's stream).
    @Test func recvTakesTheRTXPayloadTypeFromTheSDP() throws {
        let lab = try Lab(name: "rb3", up: ["--port", "5004"])
        let directory = try temporaryDirectory("gst-rtx-sdp")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sdp = directory.appendingPathComponent("stream.sdp")
        try """
        v=0
        o=- 1 1 IN IP4 10.77.1.2
        s=GStreamer rtprtxsend
        c=IN IP4 10.77.1.2
        t=0 0
        m=video 5004 RTP/AVPF 96 98
        a=rtpmap:96 H265/90000
        a=rtcp-fb:96 nack
        a=rtpmap:98 rtx/90000
        a=fmtp:98 apt=96;rtx-time=1000

        """.write(to: sdp, atomically: true, encoding: .utf8)
        let rtx = try gstreamerSends(lab: lab, loss: 10, receiveArguments: ["--latency", "300", "--sdp", sdp.path],
                                     peerArguments: ["--rtx-pt", "98"])
        func int(_ object: [String: Any], _ path: String) -> Int { intField(object, path) ?? -1 }
        print("gstreamer rtprtxsend pt 98: peer \(rtx.peer), router dropped \(rtx.dropped); recv packets \(field(rtx.recv, "packets") ?? "-") rtx \(field(rtx.recv, "rtx") ?? "-")")
        let rtxSent = rtx.peer["rtx.packets"] ?? -1
        let received = int(rtx.recv, "rtx.received")
        #expect(rtx.dropped > 0 && rtxSent > 0 && received > 0)
        #expect(int(rtx.recv, "packets.lost") + rtxSent - received == rtx.dropped)
        #expect(int(rtx.recv, "packets.recovered") > 0)
        #expect(field(rtx.recv, "rejected.foreignSSRC") == nil)
    }
}
