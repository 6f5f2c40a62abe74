import Foundation
import Glibc
import Testing

/// NACK and RTX across the lab: 2 % random loss (nft) on the media port, the same stream with
/// retransmission and with `--no-rtx`; every count checked against the router's drop counter.
/// One test at a time: side by side, their x265 encoders, the clip's recording and three
/// streams starved one another on a quarter of the machine (a cgroup quota of one CPU shared
/// with a busy loop), and the congestion test's sender dropped frames in 4 of 15 runs (3-58);
/// one at a time, 8 of 8 dropped none.
@Suite(.serialized, .enabled(if: isRoot && hasNft && uringEnabled, "needs root, nftables and io_uring (CI has them)"))
struct LabRetransmissionTests {
    static let frames = 240

    /// One run: `streamer recv` in rcv, `streamer send` in snd (30 fps, 8 s), 2 % loss from the
    /// 1st to the 6th second. Returns both stats and the router's drops during the run.
    func stream(lab: Lab, extra: [String]) throws -> (send: [String: Any], recv: [String: Any], dropped: Int, droppedBytes: Int) {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("rtx")
        defer { try? FileManager.default.removeItem(at: directory) }
        let before = try lab.counters()
        let seconds = Double(Self.frames) / 30
        // A playout delay far beyond the lab's RTT (well under 10 ms even on a loaded machine):
        // every loss has many chances to be recovered before its deadline.
        let receiver = try lab.spawn("rcv", binary, [
            "recv", "--listen", "5004", "--duration", String(seconds + 60), "--quiet", "--latency", "300",
            "--stats", directory.appendingPathComponent("recv.json").path,
        ] + extra)
        try lab.waitUntilBound("rcv", port: 5004)
        let sender = try lab.spawn("snd", binary, [
            "send", "--to", "10.77.2.2:5004", "--frames", "\(Self.frames)", "--size", "320x240", "--bitrate", "1M",
            // No congestion controller: every frame is sent, so frames are accounted for exactly.
            "--cc", "off", "--quiet", "--stats", directory.appendingPathComponent("send.json").path,
        ] + extra)
        Thread.sleep(forTimeInterval: 1)
        try lab.set(["--loss", "2"])
        Thread.sleep(forTimeInterval: 5)
        try lab.set(["--loss", "0"])
        // The receiver ends when the sender has ended, whenever that is, plus its 300 ms playout
        // delay and the last round trips (a second): every frame is out before it stops.
        let exits = stopAfterSender(sender, seconds: seconds + 20, receiver: receiver, grace: 1)
        #expect(exits.sender == 0 && exits.receiver == 0)
        let after = try lab.counters()
        return (try readJSON(directory.appendingPathComponent("send.json")),
                try readJSON(directory.appendingPathComponent("recv.json")),
                after["lossDropped", default: 0] - before["lossDropped", default: 0],
                after["lossDroppedBytes", default: 0] - before["lossDroppedBytes", default: 0])
    }

    @Test func lossIsRecoveredAndCountedExactly() throws {
        let lab = try Lab(name: "rx1", up: ["--port", "5004"])
        let rtx = try stream(lab: lab, extra: [])
        let (send, recv) = (rtx.send, rtx.recv)
        func int(_ object: [String: Any], _ path: String) -> Int { intField(object, path) ?? -1 }
        let lost = int(recv, "packets.lost")
        #expect(rtx.dropped > 0 && lost > 0)
        // The router dropped originals (the receiver's lost, the sender's lost) and
        // retransmissions (sent, never received).
        #expect(lost + int(send, "rtx.sent") - int(recv, "rtx.received") == rtx.dropped)
        // The sender knows which retransmissions arrived (per-packet feedback on the RTX SSRC).
        #expect(int(send, "rtx.lost") == int(send, "rtx.sent") - int(recv, "rtx.received"))
        #expect(int(send, "rtx.confirmed") == int(recv, "rtx.received"))
        #expect(int(send, "packets.recovered") == int(recv, "packets.recovered"))
        #expect(int(send, "packets.lost") == lost)
        #expect(int(recv, "packets.received") + lost == int(send, "packets.sent"))
        #expect(int(send, "packets.confirmed") == int(recv, "packets.received") && int(send, "packets.unconfirmed") == 0)
        #expect(int(send, "packets.sent") == int(send, "packets.confirmed") + int(send, "packets.lost")
                + int(send, "packets.abandoned"))
        // Every lost original came back in time; every frame is whole.
        #expect(int(recv, "packets.recovered") == lost)
        #expect(int(recv, "frames.complete") == int(send, "frames.sent") && int(send, "frames.sent") == Self.frames)
        #expect(int(recv, "frames.late") == 0)
        // No amplification: every NACK heard, every request answered at most once.
        #expect(int(send, "nack.received") == int(recv, "nack.sent"))
        #expect(int(send, "nack.requested") == int(recv, "nack.requested"))
        let rejected = (field(send, "nack.rejected") as? [String: Int] ?? [:]).values.reduce(0, +)
        #expect(int(send, "rtx.sent") + rejected == int(send, "nack.requested"))
        #expect(int(send, "rtx.sent") >= lost)
        // Never more than asked for: the originals' bytes plus the 2-byte RTX header each (the
        // ratio to the lost bytes, 0.9-1.05 at 50 ms RTT, is in results/rtx-table.md; with a few
        // losses per run one early re-ask moves it by a packet).
        #expect(int(send, "rtx.bytes") <= int(send, "nack.requestedBytes") + 2 * int(send, "rtx.sent"))
        print("rtx: \(int(send, "rtx.bytes")) bytes retransmitted for \(rtx.droppedBytes - 28 * rtx.dropped) lost")
        // The playout delay, measured from the kernel receive time of each frame's first packet
        // to its release: every frame waits the 300 ms, never less (the 2 % histogram buckets
        // read a sample to within 1 %); the receive loop wakes by an io_uring timeout set to the
        // frame's time, so the median frame goes out within a few scheduler ticks after it (25 ms
        // of margin for a machine twice as slow and loaded).
        let added = try #require(field(recv, "playout.addedLatencyMs") as? [String: Any])
        let p50 = try #require(added["p50"] as? Double)
        #expect(added["frames"] as? Int == int(recv, "frames.complete"))
        #expect(p50 >= 297 && p50 <= 325, "added latency p50 \(p50) ms for a playout latency of 300 ms")
        #expect((added["max"] as? Double ?? 0) >= p50)
        // Configured, the latency is its own target from the start.
        #expect(field(recv, "playout.latencyMs") as? Double == 300 && field(recv, "playout.targetLatencyMs") as? Double == 300)
        print("added latency: p50 \(p50) ms, p95 \(added["p95"] ?? "-") ms, max \(added["max"] ?? "-") ms (playout latency 300 ms)")

        let plain = try stream(lab: lab, extra: ["--no-rtx"])
        #expect(plain.dropped > 0)
        #expect(intField(plain.recv, "packets.lost") == plain.dropped && intField(plain.send, "packets.lost") == plain.dropped)
        #expect(intField(plain.recv, "packets.recovered") == 0 && intField(plain.send, "rtx.sent") == 0)
        let broken = ["frames.incomplete", "frames.missing"].compactMap { intField(plain.recv, $0) }.reduce(0, +)
        #expect(broken > 0)
        #expect(field(plain.recv, "playout.addedLatencyMs") is NSNull)
        #expect(int(plain.recv, "frames.complete") + broken == int(plain.send, "frames.sent"))
    }

    /// 150 frames across `lab` (10 % random loss on the media port) with the receiver's defaults
    /// and `sendArguments`; both stats and the router's drops during the run.
    func streamAtTenPercentLoss(lab: Lab, _ sendArguments: [String]) throws
        -> (send: [String: Any], recv: [String: Any], dropped: Int) {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("rtx-fast")
        defer { try? FileManager.default.removeItem(at: directory) }
        let receiver = try lab.spawn("rcv", binary, [
            "recv", "--listen", "5004", "--duration", "60", "--quiet",
            "--stats", directory.appendingPathComponent("recv.json").path,
        ])
        try lab.waitUntilBound("rcv", port: 5004)
        let before = try lab.counters()
        let sender = try lab.spawn("snd", binary, [
            "send", "--to", "10.77.2.2:5004", "--frames", "\(Self.fastPathFrames)", "--quiet",
            "--stats", directory.appendingPathComponent("send.json").path,
        ] + sendArguments)
        let exits = stopAfterSender(sender, seconds: 40, receiver: receiver, grace: 1)
        #expect(exits.sender == 0 && exits.receiver == 0)
        let dropped = try lab.counters()["lossDropped", default: 0] - before["lossDropped", default: 0]
        return (try readJSON(directory.appendingPathComponent("send.json")),
                try readJSON(directory.appendingPathComponent("recv.json")), dropped)
    }
    static let fastPathFrames = 150

    /// Every datagram the router dropped on the media port is an original the sender counted
    /// lost, a retransmission sent and not received, or a path-MTU probe not confirmed (the
    /// lab's path is 1,500 bytes throughout: a probe unconfirmed is a probe lost). The
    /// receiver counts the same losses, those before its first packet apart: the stream's
    /// first packets, lost, are no gap it can see (RFC 3550's base sequence is the first
    /// received; in the lab at 10 % loss one run in ten loses the first), and it counts them
    /// from the sender reports (`packets.sentBeforeFirst`).
    func expectEveryDropCounted(send: [String: Any], recv: [String: Any], dropped: Int) {
        func int(_ object: [String: Any], _ path: String) -> Int { intField(object, path) ?? -1 }
        let lost = int(send, "packets.lost")
        let probesLost = int(send, "path.probes.sent") - int(send, "path.probes.confirmed")
        #expect(lost > 0 && lost + int(send, "rtx.sent") - int(recv, "rtx.received") + probesLost == dropped)
        #expect(int(recv, "packets.lost") + int(recv, "packets.sentBeforeFirst") == lost)
    }

    /// The defaults on a fast path (the lab's round trip is well under a millisecond, a LAN's):
    /// 10 % random loss on media and retransmissions alike, the receiver's derived playout
    /// latency (50 ms). A loss is detected at the next packet's arrival and asked for at once;
    /// the sender answers, and asks again about an RTT later are answered too, so a loss stays
    /// unrecovered only when three or more tries are all lost (0.1 % at 10 %). Before, the
    /// sender took every ask sooner than 1 ms after the packet's send for premature
    /// (`nack.rejected.tooEarly`): 44 % of the losses recovered and half the frames late.
    /// Margins: at least 80 % recovered and 20 % of the frames late (measured 99-100 % and 0-1
    /// frames of 150 at 640x360; on a quarter of the machine, a cgroup quota of one CPU shared
    /// with a busy loop, beside `congestionControlUnderRandomLossDropsNoFrame`: 91 %, 13 late;
    /// the fault it guards against left 44 % recovered and half the frames late).
    @Test func theDefaultLatencyRecoversOnAFastPath() throws {
        let lab = try Lab(name: "rxd", up: ["--port", "5004", "--loss", "10"])
        let (send, recv, dropped) = try streamAtTenPercentLoss(lab: lab, ["--size", "640x360", "--cc", "off"])
        let frames = Self.fastPathFrames
        func int(_ object: [String: Any], _ path: String) -> Int { intField(object, path) ?? -1 }
        let lost = int(recv, "packets.lost")
        print("default latency at 10 % loss: \(int(recv, "packets.recovered")) of \(lost) lost recovered, frames \(field(recv, "frames") ?? "-"), nack.rejected \(field(send, "nack.rejected") ?? "-"), playout \(field(recv, "playout.latencyMs") ?? "-") ms")
        expectEveryDropCounted(send: send, recv: recv, dropped: dropped)
        #expect(Double(int(recv, "packets.recovered")) >= 0.8 * Double(lost))
        #expect(int(recv, "frames.late") * 5 <= frames)
        #expect(int(send, "frames.sent") == frames)
        #expect(field(send, "nack.rejected.tooEarly") == nil || int(send, "nack.rejected.tooEarly") * 10 <= int(send, "nack.requested"))
    }

    /// Congestion control on (a 640x360 clip x265 made at 2.5 Mbit/s beforehand, streamed at
    /// 30 fps: the same load however busy the machine) on the same fast path at 10 % random
    /// loss. Loss cuts keep the window at a few packets; before, now and then it filled with
    /// lost packets (the last ones sent, or retransmissions) that nothing showed lost, the flow
    /// stalled for 300-400 ms and frames aged out in the sender (`cc.framesDropped` 8, 25, 27
    /// of 150; with x265 live at 4 Mbit/s 13-40 in 31 of 32 runs). Now a tail probe or the time
    /// threshold shows the loss and an ask repeated takes the lost retransmission out of
    /// flight: none dropped (3 of 3 runs of the clip, 16 of 16 live, `results/cc/random-loss.md`).
    /// Every drop counted (`expectEveryDropCounted`); margins as in
    /// `theDefaultLatencyRecoversOnAFastPath`.
    @Test func congestionControlUnderRandomLossDropsNoFrame() throws {
        let lab = try Lab(name: "rxc", up: ["--port", "5004", "--loss", "10"])
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("rtx-cc-clip")
        defer { try? FileManager.default.removeItem(at: directory) }
        let clip = try recordClip(binary, into: directory, size: "640x360", bitrate: "2500k", frames: Self.fastPathFrames)
        let (send, recv, dropped) = try streamAtTenPercentLoss(lab: lab, ["--source", clip.path, "--cc", "on"])
        let frames = Self.fastPathFrames
        func int(_ object: [String: Any], _ path: String) -> Int { intField(object, path) ?? -1 }
        let lost = int(recv, "packets.lost")
        print("congestion control at 10 % loss: frames \(field(send, "frames") ?? "-"), cc \(field(send, "cc.losses") ?? "-"), " +
              "dropped \(field(send, "cc.framesDropped") ?? "-"), recovered \(int(recv, "packets.recovered")) of \(lost), " +
              "receiver frames \(field(recv, "frames") ?? "-")")
        #expect(int(send, "cc.framesDropped") == 0)
        #expect(int(send, "frames.sent") == frames)
        expectEveryDropCounted(send: send, recv: recv, dropped: dropped)
        #expect(Double(int(recv, "packets.recovered")) >= 0.8 * Double(lost))
        #expect(int(recv, "frames.late") * 5 <= frames)
    }
}
