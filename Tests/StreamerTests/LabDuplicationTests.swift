import Foundation
import Glibc
import Testing

/// A path that duplicates packets (a link layer that resends a frame whose acknowledgement was
/// lost): tools/netlab's bottleneck sends 5 % of the UDP packets toward the receiver twice, the
/// copy right after the original, and counts them. The default receiver (loss recovery,
/// feedback) and the default sender (congestion control on) must take the copies for what they
/// are: counted, never delivered twice, never a loss, a retransmission or a reason to slow down.
@Suite(.enabled(if: isRoot && hasNft && uringEnabled, "needs root, nftables and io_uring (CI has them)"))
struct LabDuplicationTests {
    static let frames = 240

    @Test func duplicatesAreCountedAndChangeNothingElse() throws {
        let lab = try Lab(name: "dup1", up: ["--bottleneck", "delay=5ms,dup=5"])
        let run = try lab.streamDefaultPair(frames: Self.frames)
        let (send, recv) = (run.send, run.recv)
        let int = run.int
        let duplicated = run.delta("bottleneckDuplicated"), arrived = run.delta("bottleneckArrived")
        let sent = int(send, "packets.sent"), duplicates = int(recv, "packets.duplicate")
        print("""
            dup: bottleneck duplicated \(duplicated) of \(arrived) UDP packets; media sent \(sent), \
            received \(int(recv, "packets.received")), duplicates at the receiver \(duplicates)
            """)

        // Nothing lost on this path (no rate, no loss): every packet arrived, once as received.
        #expect(run.delta("bottleneckTailDropped") + run.delta("bottleneckAqmDropped") + run.delta("bottleneckDeviceDropped") == 0)
        #expect(int(recv, "packets.received") == sent && int(recv, "packets.lost") == 0)
        // Every frame the sender sent is whole (with congestion control on, a loaded machine may
        // drop a frame at the sender, counted by reason).
        let droppedBySender = ["frames.droppedQueueFull", "frames.droppedUnconfirmed", "frames.droppedUnviable"]
            .map { int(send, $0) }.reduce(0, +)
        #expect(int(send, "frames.encoded") == Self.frames && int(send, "frames.sent") + droppedBySender == Self.frames)
        #expect(int(recv, "frames.complete") == int(send, "frames.sent"))
        #expect(int(recv, "frames.incomplete") + int(recv, "frames.missing") + int(recv, "frames.undecodable") == 0)
        // The copies: every extra datagram at the socket counted a duplicate, none of them taken.
        #expect(duplicates > 0 && run.datagramsAtReceiver == sent + duplicates)
        // The bottleneck also copied RTCP (sender reports, the probe, the BYE): its count is the
        // media's copies plus at most every packet forward that was not media (the pings of
        // `netlab up` went before `before` was read).
        #expect(duplicated >= duplicates && duplicated - duplicates <= arrived - sent)
        // 5 % of the media (~800 packets; a standard deviation of ~6): far from none.
        #expect(duplicates >= sent / 50)
        // No loss seen, none asked for, no retransmission, no cut: the sender's and the
        // controller's view agree with the receiver's.
        #expect(int(send, "packets.lost") == 0 && int(send, "packets.confirmed") == sent)
        #expect(int(recv, "nack.sent") == 0 && int(send, "rtx.sent") == 0 && int(recv, "rtx.received") == 0)
        #expect(int(send, "cc.losses.declared") == 0)
    }
}
