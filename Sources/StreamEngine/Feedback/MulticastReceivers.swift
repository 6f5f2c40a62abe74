import MediaFormats
import UringIO

/// What one receiver of a multicast flow last reported about it (RTCP receiver report,
/// RFC 3550 6.4.2), known by the receiver's own SSRC.
public struct MulticastReceiverReport: Sendable, Hashable {
    /// The reporting receiver's SSRC.
    public var ssrc: UInt32
    /// Fraction of packets lost in its last report interval, 0...1.
    public var fractionLost: Double
    /// Packets it lost since it began receiving (negative after duplicates).
    public var cumulativeLost: Int
    /// The extended highest sequence number it received.
    public var highestSequence: UInt32
    /// Its interarrival jitter, in milliseconds.
    public var jitterMs: Double
    /// Report blocks about this flow it sent.
    public var reports: Int
    /// When its last report arrived (Unix seconds).
    public var lastReportAtUnix: Double
    /// The round trip of the last sender report it answered (LSR/DLSR, RFC 3550 6.4.1), in
    /// milliseconds; nil until it answered one.
    public var rttMs: Double?
    /// Where its last report came from (its unicast address and port), when known.
    public var address: String?
}

/// The receivers of one multicast flow that sent receiver reports, bounded: a new reporter
/// beyond `capacity` replaces the one heard from least recently (counted in `evicted`).
struct MulticastReceivers {
    let capacity: Int
    private var entries: [UInt32: (report: MulticastReceiverReport, heard: Int64)] = [:]
    /// Receivers dropped to make room.
    private(set) var evicted = 0
    /// The average size of the RTCP packets received and sent, IP and UDP headers included
    /// (RFC 3550 6.3.3's estimate, weight 1/16); nil before the first.
    private(set) var averagePacketSize: Double?
    /// IP and UDP header bytes counted with each RTCP datagram.
    let packetOverhead: Int

    init(capacity: Int, packetOverhead: Int = 28) {
        self.capacity = max(1, capacity)
        self.packetOverhead = packetOverhead
    }

    /// Receivers known.
    var count: Int { entries.count }

    /// The sender sent an RTCP datagram of `bytes`.
    mutating func noteSent(bytes: Int) { noteSize(bytes) }

    private mutating func noteSize(_ bytes: Int) {
        let size = Double(bytes + packetOverhead)
        averagePacketSize = averagePacketSize.map { $0 + (size - $0) / 16 } ?? size
    }

    /// True when every receiver known reported `sequence` (the low 16 bits of its extended
    /// highest sequence number) or a later one: its reports cover the stream to there.
    func allReported(through sequence: UInt16) -> Bool {
        entries.values.allSatisfy { Int16(bitPattern: UInt16(truncatingIfNeeded: $0.report.highestSequence) &- sequence) >= 0 }
    }

    /// The RSI (RFC 5760) the sender of `ssrc` sends its group: one Group and Average Packet
    /// Size sub-report with the receivers known and the average RTCP packet size.
    func summary(ssrc: UInt32, realtime: Int64) -> RTCPReceiverSummary {
        let ntp = NTPTime(unixSeconds: realtime / 1_000_000_000, nanoseconds: UInt32(realtime % 1_000_000_000))
        let average = UInt16(clamping: Int((averagePacketSize ?? 0).rounded()))
        return RTCPReceiverSummary(ssrc: ssrc, summarizedSSRC: ssrc, ntpTimestamp: ntp.rawValue, subReports: [
            .groupAndAveragePacketSize(groupSize: UInt32(entries.count), averagePacketSize: average),
        ])
    }

    /// Every receiver's last report, by SSRC.
    var reports: [MulticastReceiverReport] { entries.values.map(\.report).sorted { $0.ssrc < $1.ssrc } }

    /// Takes the blocks of an RTCP compound datagram that report on `ssrc` (from RRs and SRs);
    /// returns whether it held a PLI for `ssrc`. `now` is monotonic, `realtime` the arrival's
    /// wall-clock nanoseconds.
    mutating func handle(_ payload: UnsafeRawBufferPointer, ssrc: UInt32, clockRate: Double, now: Int64,
                         realtime: Int64, from source: SocketAddress? = nil) -> Bool {
        var pictureLoss = false
        noteSize(payload.count)
        for packet in RTCPPacket.parseCompound(payload).packets {
            switch packet {
            case .receiverReport(let report):
                for block in report.reportBlocks where block.ssrc == ssrc {
                    record(reporter: report.ssrc, block: block, clockRate: clockRate, now: now, realtime: realtime,
                           address: source?.description)
                }
            case .senderReport(let report):
                for block in report.reportBlocks where block.ssrc == ssrc {
                    record(reporter: report.ssrc, block: block, clockRate: clockRate, now: now, realtime: realtime,
                           address: source?.description)
                }
            case .pictureLossIndication(let pli) where pli.mediaSSRC == ssrc:
                pictureLoss = true
            default:
                continue
            }
        }
        return pictureLoss
    }

    /// Records one report block of `reporter`.
    mutating func record(reporter: UInt32, block: RTCPReportBlock, clockRate: Double, now: Int64, realtime: Int64,
                         address: String? = nil) {
        let previous = entries[reporter]?.report.reports ?? 0
        var rttMs = entries[reporter]?.report.rttMs
        let ntp = NTPTime(unixSeconds: realtime / 1_000_000_000, nanoseconds: UInt32(realtime % 1_000_000_000))
        if let compact = NTPTime.roundTripTime(arrivalCompact: ntp.compact, lastSR: block.lastSR,
                                               delaySinceLastSR: block.delaySinceLastSR) {
            rttMs = Double(NTPTime.microseconds(compact: compact)) / 1000
        }
        if previous == 0, entries.count >= capacity,
           let oldest = entries.min(by: { $0.value.heard < $1.value.heard })?.key {
            entries[oldest] = nil
            evicted += 1
        }
        let report = MulticastReceiverReport(
            ssrc: reporter, fractionLost: Double(block.fractionLost) / 256, cumulativeLost: Int(block.cumulativeLost),
            highestSequence: block.extendedHighestSequence, jitterMs: Double(block.jitter) / clockRate * 1000,
            reports: previous + 1, lastReportAtUnix: Double(realtime) / 1e9, rttMs: rttMs, address: address)
        entries[reporter] = (report, now)
    }
}
