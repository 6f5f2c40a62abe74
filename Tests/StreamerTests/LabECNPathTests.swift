import Foundation
import Glibc
import Testing

/// Paths that rewrite the ECN field, before tools/netlab's bottleneck: one that clears it
/// (bleach) and one that turns ECT(1) into ECT(0) (a hop that knows only classic ECN), counted
/// by the bottleneck. An ECT(1) sender must see from its receiver's per-packet reports what the
/// path did (`ecn.path`); on the remarking path it sends ECT(0) from then on, and answers CE
/// as a classic flow (its packets reach classic AQMs as ECT(0)).
@Suite(.enabled(if: isRoot && hasNft && uringEnabled, "needs root, nftables and io_uring (CI has them)"))
struct LabECNPathTests {
    static let frames = 150

    @Test func aRemarkingPathIsSeenAndTheFlowSendsECT0() throws {
        let lab = try Lab(name: "ecr1", up: ["--bottleneck", "delay=5ms,ecn=ect0"])
        let run = try lab.streamDefaultPair(frames: Self.frames, ["--ecn", "ect1"])
        let (send, recv) = (run.send, run.recv)
        let int = run.int
        let changed = run.delta("bottleneckEcnChanged")
        let switchedAt = int(send, "ecn.remarkedAtPacket")
        print("ecn ect0 path: remarked by the hop \(changed), the sender switched after \(switchedAt) packets, path \(field(send, "ecn.path") ?? "-")")
        #expect(int(recv, "frames.complete") == int(send, "frames.sent") && int(send, "packets.failed") == 0)
        // It took a window of reports to see it, and the sender switched within the stream.
        #expect(switchedAt >= 16 && switchedAt < int(send, "packets.sent"))
        #expect(field(send, "ecn.codepoint") as? String == "ect0")
        // Every packet it sent as ECT(1) was rewritten by the hop (media only: its probes are
        // Not-ECT, its RTCP socket unmarked, and nothing was lost, so nothing resent), and
        // nothing after the switch: the hop leaves ECT(0) alone.
        #expect(changed == switchedAt)
        #expect(int(recv, "ecn.ect1") == 0 && int(recv, "ecn.notEct") == 0)
        // The reports after the switch show ECT(0) carried: the path is capable of what it sends now.
        #expect(field(send, "ecn.path") as? String == "capable")
        #expect(int(send, "ecn.reported.remarked") >= 16 && int(send, "ecn.reported.bleached") == 0)  // a window (ECNPathCheck.window)
    }

    @Test func aBleachingPathIsSeen() throws {
        let lab = try Lab(name: "ecb1", up: ["--bottleneck", "delay=5ms,ecn=bleach"])
        let run = try lab.streamDefaultPair(frames: Self.frames, ["--ecn", "ect1"])
        let (send, recv) = (run.send, run.recv)
        let int = run.int
        print("ecn bleach path: cleared by the hop \(run.delta("bottleneckEcnChanged")), path \(field(send, "ecn.path") ?? "-")")
        #expect(int(recv, "frames.complete") == int(send, "frames.sent"))
        // Every media datagram arrived Not-ECT, and the sender knows (it keeps sending ECT(1):
        // nothing it sends instead would get a signal through that hop).
        #expect(int(recv, "ecn.notEct") == run.datagramsAtReceiver && run.datagramsAtReceiver == int(send, "packets.sent"))
        #expect(run.delta("bottleneckEcnChanged") == int(send, "packets.sent"))
        #expect(field(send, "ecn.path") as? String == "bleached" && field(send, "ecn.codepoint") as? String == "ect1")
        #expect(int(send, "ecn.reported.bleached") == int(send, "packets.confirmed") && int(send, "ecn.reported.asSent") == 0)
        #expect(field(send, "ecn.remarkedAtPacket") is NSNull)
    }
}
