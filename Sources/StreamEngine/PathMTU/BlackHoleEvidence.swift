/// What a flow's sent-packet log says about the MTU in use since the last look, for
/// `PathMTUProber.mediaAboveBase`: full-size packets (sized to the MTU in use, above the base)
/// lost, the sends they came from, and what was confirmed meanwhile.
///
/// A packet is declared lost by age (`SenderFeedback.lossTimeout`: at least 200 ms after its
/// send), a confirmation arrives an RTT after its packet: losses are read long after the
/// confirmations of the packets sent after them. So a loss counts only when no full-size
/// packet sent after it was confirmed (the path carried that size since: it was congestion or
/// random loss). A black hole loses every full-size packet, so nothing filters its losses.
struct BlackHoleEvidence: Sendable {
    /// What was read.
    struct Reading: Sendable, Equatable {
        /// Full-size packets lost with no full-size packet sent after them confirmed.
        var lost = 0
        /// The sends those came from (the packets of one send share its time).
        var lostSends = 0
        /// Full-size packets confirmed.
        var confirmed = 0
        /// Smaller packets confirmed.
        var smallConfirmed = 0
    }

    /// When the last lost packet counted was sent: a send is counted once however many of its
    /// packets are declared lost, over however many reads.
    private var lastLossSentAt: Int64 = .min
    private var fullConfirmedSeen = 0
    private var confirmedSeen = 0

    /// Reads (and takes) what `log` declared lost and counts what it confirmed since the last
    /// read. `fullSize`: the full packet at the MTU in use (`MediaFlow.fullDatagramSize`),
    /// `maxSize` the largest packet it allows; `baseSize` the largest packet at the base MTU
    /// (no evidence at or below it). Sets `log.fullBytes` to `fullSize` for the next read.
    mutating func read(_ log: inout SentPacketLog, fullSize: Int, maxSize: Int, baseSize: Int) -> Reading {
        var reading = Reading()
        let newestThrough = log.newestFullConfirmedSentAt
        for packet in log.takeLostPackets() where Int(packet.bytes) >= fullSize && Int(packet.bytes) <= maxSize
            && Int(packet.bytes) > baseSize && packet.sentAt > newestThrough {
            reading.lost += 1
            if packet.sentAt != lastLossSentAt {
                reading.lostSends += 1
                lastLossSentAt = packet.sentAt
            }
        }
        reading.confirmed = log.fullConfirmed - fullConfirmedSeen
        reading.smallConfirmed = log.confirmed - confirmedSeen - reading.confirmed
        skip(&log)
        log.fullBytes = fullSize
        return reading
    }

    /// Passes over what `log` says now (losses of an outage are no evidence).
    mutating func skip(_ log: inout SentPacketLog) {
        _ = log.takeLostPackets()
        fullConfirmedSeen = log.fullConfirmed
        confirmedSeen = log.confirmed
    }
}
