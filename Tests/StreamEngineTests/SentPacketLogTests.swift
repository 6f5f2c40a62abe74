import Testing
@testable import StreamEngine

struct SentPacketLogTests {
    /// A receiver that reports only its highest sequence number: a report covering packets
    /// already declared lost for their age confirms them after all; counts stay exact.
    @Test func cumulativeReportsConfirmPacketsDeclaredLostForTheirAge() {
        var log = SentPacketLog(capacity: 64)
        for sequence in 1000..<1010 { log.recordSent(sequence: Int64(sequence), bytes: 100, at: Int64(sequence)) }
        #expect(log.expireUnconfirmed(sentBefore: 1006) == 6)  // 1000...1005 too old
        #expect(log.lost == 6 && log.unconfirmedPackets == 4)
        log.confirmThrough(1007)
        #expect(log.confirmed == 8 && log.lost == 0 && log.unconfirmedPackets == 2)
        log.confirmThrough(1003)  // an older report changes nothing
        #expect(log.confirmed == 8 && log.lost == 0)
        log.confirmThrough(1009)
        #expect(log.confirmed == 10 && log.unconfirmedPackets == 0 && log.unconfirmedBytes == 0)
        log.confirmThrough(2000)  // beyond what was sent: nothing more
        #expect(log.confirmed == 10 && log.sent == 10)
    }
}
