import MediaFormats
import Testing
@testable import StreamEngine

/// The unconfirmed bound counts what the log will count: whole datagrams, RTP and FU
/// headers included, not the access unit's NAL bytes.
struct MediaFlowBoundTests {
    /// Writes every datagram the flow has ready; returns their sizes.
    private func drain(_ flow: MediaFlow) -> [Int] {
        var sizes: [Int] = []
        var buffer = [UInt8](repeating: 0, count: 2048)
        while let pending = flow.peekDatagram() {
            buffer.withUnsafeMutableBytes { flow.writeDatagram(into: $0) }
            sizes.append(pending.size)
        }
        return sizes
    }

    private func frame(_ bytes: Int, timestamp: UInt32) -> AccessUnit {
        // One IDR NAL unit: FU fragments at a 1200-byte datagram size.
        AccessUnit(nalUnits: [[0x26, 0x01] + [UInt8](repeating: 0xAB, count: bytes - 2)], timestamp: timestamp,
                   isKeyframe: true)
    }

    @Test func aFrameWhoseDatagramsWouldPassTheBoundIsDropped() throws {
        let flow = try MediaFlow(route: 0, maxDatagramSize: 1200)
        flow.tracksPackets = true
        // 4000 NAL bytes go as 4 FU datagrams: 4 x 12 RTP + 4 x 3 FU header + 3998 = 4058 B.
        flow.enqueue(frame(4000, timestamp: 0))
        let first = drain(flow)
        #expect(first.count == 4 && first.reduce(0, +) == 4058)
        #expect(flow.log.unconfirmedBytes == 4058)
        // A second such frame: its NAL bytes fit under 8100 (4058 + 4000), its datagrams do not
        // (4058 + 4058 = 8116): dropped, and the bound is never passed.
        flow.maxUnconfirmedBytes = 8100
        flow.enqueue(frame(4000, timestamp: 3000))
        #expect(drain(flow).isEmpty)
        #expect(flow.framesDroppedUnconfirmed == 1)
        #expect(flow.peakUnconfirmedBytes <= 8100)
        // With room for its datagrams exactly, the next keyframe goes.
        flow.maxUnconfirmedBytes = 8116
        flow.enqueue(frame(4000, timestamp: 6000))
        #expect(drain(flow).reduce(0, +) == 4058)
        #expect(flow.peakUnconfirmedBytes == 8116)
    }
}
