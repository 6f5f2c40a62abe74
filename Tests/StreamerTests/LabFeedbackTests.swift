import Foundation
import Glibc
import Testing

/// Streams across the lab (sender, router with nftables, receiver) and checks every count
/// against the router's own counters.
@Suite(.enabled(if: isRoot && hasNft && uringEnabled, "needs root, nftables and io_uring (CI has them)"))
struct LabFeedbackTests {
    /// Runs `streamer recv` in rcv and `streamer send` in snd for `frames` frames; `during`
    /// is called once the stream runs, and returns before its last second.
    func stream(lab: Lab, frames: Int, sendArguments: [String] = [], during: () throws -> Void)
        throws -> (send: [String: Any], recv: [String: Any], counters: [String: Int])
    {
        let binary = try #require(streamerBinary(), "streamer not built")
        let directory = try temporaryDirectory("lab")
        defer { try? FileManager.default.removeItem(at: directory) }
        let seconds = Double(frames) / 30
        // Originals only: retransmissions would cross the router's loss too (LabRetransmissionTests counts them).
        let receiver = try lab.spawn("rcv", binary, [
            "recv", "--listen", "5004", "--duration", String(seconds + 60), "--quiet", "--no-rtx",
            "--stats", directory.appendingPathComponent("recv.json").path,
        ])
        try lab.waitUntilBound("rcv", port: 5004)
        let sender = try lab.spawn("snd", binary, [
            "send", "--to", "10.77.2.2:5004", "--frames", "\(frames)", "--size", "320x240", "--bitrate", "1M",
            "--quiet", "--no-rtx", "--stats", directory.appendingPathComponent("send.json").path,
        ] + sendArguments)
        try during()
        let exits = stopAfterSender(sender, seconds: seconds + 20, receiver: receiver, grace: 1)
        #expect(exits.sender == 0 && exits.receiver == 0)
        return (try readJSON(directory.appendingPathComponent("send.json")),
                try readJSON(directory.appendingPathComponent("recv.json")), try lab.counters())
    }

    /// With 0, 2 and 10 % random loss from nft (in the middle of the stream), the receiver's
    /// lost count equals nft's drop counter, so does the sender's after the final feedback,
    /// and every frame sent is complete, incomplete or missing at the receiver.
    @Test(arguments: [0, 2, 10])
    func lossIsCountedExactly(percent: Int) throws {
        let lab = try Lab(name: "fl\(percent)", up: ["--port", "5004"])
        // Without congestion control: under 10 % loss it would drop whole frames at the sender,
        // which the receiver counts as missing beside those it was sent (LabCongestionTests covers it).
        let result = try stream(lab: lab, frames: 240, sendArguments: ["--cc", "off"]) {
            Thread.sleep(forTimeInterval: 1)
            try lab.set(["--loss", "\(percent)"])
            Thread.sleep(forTimeInterval: 5)
            try lab.set(["--loss", "0"])
        }
        let dropped = try #require(result.counters["lossDropped"])
        if percent > 0 { #expect(dropped > 0) } else { #expect(dropped == 0) }
        #expect(intField(result.recv, "packets.lost") == dropped)
        #expect(intField(result.send, "packets.lost") == dropped)
        #expect(intField(result.send, "packets.unconfirmed") == 0)
        #expect(intField(result.recv, "packets.received").map { $0 + dropped } == intField(result.send, "packets.sent"))
        #expect(intField(result.send, "packets.confirmed") == intField(result.recv, "packets.received"))
        let accounted = ["frames.complete", "frames.incomplete", "frames.missing"]
            .compactMap { intField(result.recv, $0) }.reduce(0, +)
        #expect(accounted == intField(result.send, "frames.sent"))
        // Random loss on a path that carries full-size packets is no path-MTU black hole.
        #expect(intField(result.send, "path.blackHoles") == 0 && intField(result.send, "path.mtu") == 1500,
                "path \(field(result.send, "path") ?? "-")")
    }

    /// nft marks 5 % of the media CE: the receiver counts exactly those, and the sender hears of each.
    @Test func ceMarksAreCountedAndReported() throws {
        let lab = try Lab(name: "fce", up: ["--port", "5004", "--ce", "5"])
        let result = try stream(lab: lab, frames: 150) {}
        let marked = try #require(result.counters["ceMarked"])
        #expect(marked > 0)
        #expect(intField(result.recv, "ecn.ce") == marked)
        #expect(intField(result.send, "ecn.ceReported") == marked)
        #expect(intField(result.recv, "packets.lost") == 0)
    }
}
