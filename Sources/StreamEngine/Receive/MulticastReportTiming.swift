import MediaFormats

/// When a receiver of a multicast group sends its regular RTCP reports: at the RFC 3550
/// interval (`RTCPReportSchedule`, with the reduced minimum), which grows with the group so
/// that all receivers together stay within their 75 % of RTCP's 5 % of the session bandwidth.
///
/// The receivers of a group do not hear each other (their reports go unicast to the sender),
/// so the member count and the average RTCP packet size come from the sender's RTCP Receiver
/// Summary Information (RFC 5760 RSI, its Group and Average Packet Size sub-report: the group
/// size is the number of receivers the sender knows, and the members are those plus the
/// sender, at least 2). Without one (a sender that sends none, such as ffmpeg) the members are this
/// receiver and the sources it heard RTCP from, at least 2, and the average packet size is
/// its own estimate over the RTCP it sent and received (RFC 3550 6.3.3, weight 1/16). The
/// session bandwidth is the rate of the media received, headers included, measured from the
/// first packet (the first regular report waits `warmUp` for it).
///
/// Pure: times (nanoseconds) and random draws come from the caller.
struct MulticastReportTiming: Sendable {
    /// IP and UDP header bytes added to each datagram's size (28 for IPv4, 48 for IPv6).
    let overhead: Int
    private var firstMedia: Int64?
    private var mediaBytes = 0
    private var estimatedPacketSize: Double?
    private var summary: (members: Int, averagePacketSize: Double?)?
    private var heardSources: Set<UInt32> = []
    private var schedule: RTCPReportSchedule?

    /// The rate is measured over at least this long before the first regular report is scheduled.
    static let warmUp: Int64 = 500_000_000
    /// At most this many RTCP sources are counted as members.
    static let maxHeardSources = 64

    init(ipv6: Bool) { overhead = ipv6 ? 48 : 28 }

    /// A media datagram of `bytes` (UDP payload) arrived.
    mutating func noteMedia(bytes: Int, now: Int64) {
        if firstMedia == nil { firstMedia = now }
        mediaBytes += bytes + overhead
    }

    /// An RTCP datagram of `bytes` arrived from the source, from the SSRCs `sources`.
    mutating func noteReceived(bytes: Int, sources: [UInt32]) {
        noteSize(bytes)
        for ssrc in sources where heardSources.count < Self.maxHeardSources { heardSources.insert(ssrc) }
    }

    /// This receiver sent an RTCP datagram of `bytes`.
    mutating func noteSent(bytes: Int) { noteSize(bytes) }

    /// The sender's RSI Group and Average Packet Size: `groupSize` receivers it knows, RTCP
    /// packets of `averagePacketSize` octets on average (0: not said).
    mutating func noteSummary(groupSize: UInt32, averagePacketSize: UInt16) {
        // Before the sender has heard this receiver its group may be empty: still itself and the sender.
        summary = (max(2, Int(min(groupSize, 1 << 24)) + 1), averagePacketSize > 0 ? Double(averagePacketSize) : nil)
    }

    private mutating func noteSize(_ bytes: Int) {
        let size = Double(bytes + overhead)
        estimatedPacketSize = estimatedPacketSize.map { $0 + (size - $0) / 16 } ?? size
    }

    /// Members in the session as this receiver counts them (itself included).
    var members: Int { summary?.members ?? max(2, heardSources.count + 1) }

    /// The interval last drawn, in seconds (nil before the schedule starts).
    var intervalSeconds: Double? { schedule?.lastInterval }

    /// When `due` has something to do next (nil before media arrived).
    var nextDeadline: Int64? {
        guard let firstMedia else { return nil }
        return schedule?.next ?? firstMedia + Self.warmUp
    }

    private func parameters(now: Int64) -> RTCPReportInterval {
        let elapsed = Double(max(now - (firstMedia ?? now), 1)) / 1e9
        let bandwidth = Double(mediaBytes * 8) / elapsed
        // Before any RTCP was sent or heard: an RR with one block and an SDES, about 90 bytes.
        let size = summary?.averagePacketSize ?? estimatedPacketSize ?? Double(90 + overhead)
        return RTCPReportInterval(members: members, senders: 1, sessionBandwidth: bandwidth,
                                  averagePacketSize: size, reducedMinimum: true)
    }

    /// True when a regular report is due at `now` (then send it and call `reported`).
    /// `unit`: a uniform draw in [0, 1].
    mutating func due(now: Int64, unit: Double) -> Bool {
        guard let deadline = nextDeadline, now >= deadline else { return false }
        guard schedule != nil else {
            schedule = RTCPReportSchedule(interval: parameters(now: now), now: now, unit: unit)
            return false
        }
        schedule!.interval = parameters(now: now)
        return schedule!.reconsider(now: now, unit: unit)
    }

    /// A report (regular, early or final) went at `now`.
    mutating func reported(now: Int64, unit: Double) {
        guard schedule != nil else { return }
        schedule!.interval = parameters(now: now)
        schedule!.reported(now: now, unit: unit)
    }
}
