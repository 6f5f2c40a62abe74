import Testing
import UringIO

@Suite(.enabled(if: uringAvailable, "io_uring is disabled on this kernel"))
struct ZeroCopyTests {
    /// Zero-copy GSO sends (IORING_OP_SENDMSG_ZC): every datagram arrives intact and in
    /// order, and a slot comes back (with its report) only after the kernel's notification,
    /// so two slots carry six sends one after another.
    @Test func slotsComeBackAfterTheirNotification() throws {
        try #require(UDPSocket.kernelSupportsGSO, "kernel without UDP_SEGMENT")
        let pair = try LoopbackPair(slots: 2, zeroCopy: true)
        var all: [[UInt8]] = []
        for group in 0..<6 {
            while pair.queue.freeSlots == 0 { try pair.pump(until: 0, reportsExpected: pair.reports.count + 1) }
            let datagrams = (0..<16).map { patternDatagram(index: group * 16 + $0, length: 1000) }
            all += datagrams
            try pair.send(datagrams, mark: TrafficMark(.video, ecn: .ect0), tag: UInt64(group))
        }
        try pair.pump(until: all.count, reportsExpected: 6)
        #expect(pair.received.map(\.payload) == all)
        #expect(pair.reports.map(\.tag) == [0, 1, 2, 3, 4, 5])
        #expect(pair.reports.map(\.sentDatagrams) == Array(repeating: 16, count: 6))
        #expect(pair.reports.allSatisfy { $0.error == nil })
        #expect(pair.queue.counters.sendCalls == 6 && pair.queue.counters.gsoSends == 6)
        #expect(pair.queue.slotsInFlight == 0 && pair.queue.freeSlots == 2)
    }
}
