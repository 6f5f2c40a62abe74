/// The RTCP report interval of RFC 3550 section 6.3 (the algorithm of appendix A.7): RTCP
/// takes 5 % of the session bandwidth, receivers share 75 % of that (when senders are at
/// most a quarter of the members), so the interval grows with the number of members and the
/// average RTCP packet size; it is at least a minimum (5 s, or the reduced minimum of 6.2,
/// 360 / session kbit/s, which RFC 3550 allows and this engine's multicast receivers use),
/// half of it before the first report; then drawn from [0.5, 1.5] of that and divided by
/// e - 3/2 to compensate for timer reconsideration (`RTCPReportSchedule`), which otherwise
/// brings the mean interval above the computed one.
///
/// Pure: no clock, no randomness of its own (the draw is passed in).
public struct RTCPReportInterval: Sendable, Hashable {
    /// Participants in the session (this one included), at least 1.
    public var members: Int
    /// Members that sent RTP recently (RFC 3550's `senders`).
    public var senders: Int
    /// The session bandwidth: the media's rate, in bits per second.
    public var sessionBandwidth: Double
    /// The average size of an RTCP packet sent or received, UDP and IP headers included (octets).
    public var averagePacketSize: Double
    /// True for the sender of media (it reports in the senders' 25 %).
    public var weSent: Bool
    /// Use the reduced minimum, 360 / (session bandwidth in kbit/s) seconds, instead of 5 s.
    public var reducedMinimum: Bool

    /// Share of the session bandwidth RTCP takes.
    public static let rtcpFraction = 0.05
    /// Share of the RTCP bandwidth the senders get (receivers the rest).
    public static let senderFraction = 0.25
    /// RFC 3550's minimum interval (seconds).
    public static let minimumSeconds = 5.0
    /// e - 3/2: the compensation for timer reconsideration.
    public static let compensation = 2.718281828459045 - 1.5

    /// Makes the parameters of an interval.
    public init(members: Int, senders: Int = 1, sessionBandwidth: Double, averagePacketSize: Double,
                weSent: Bool = false, reducedMinimum: Bool = false) {
        self.members = members
        self.senders = senders
        self.sessionBandwidth = sessionBandwidth
        self.averagePacketSize = averagePacketSize
        self.weSent = weSent
        self.reducedMinimum = reducedMinimum
    }

    /// The minimum interval in seconds (halved with `initial`, before the first report).
    public func minimum(initial: Bool = false) -> Double {
        let floor = reducedMinimum && sessionBandwidth > 0 ? min(Self.minimumSeconds, 360 / (sessionBandwidth / 1000))
            : Self.minimumSeconds
        return initial ? floor / 2 : floor
    }

    /// The interval before randomization, in seconds: the members' share of the RTCP
    /// bandwidth divided among them, at least `minimum(initial:)`.
    public func deterministic(initial: Bool = false) -> Double {
        var bandwidth = max(sessionBandwidth, 1) * Self.rtcpFraction / 8  // octets per second
        var count = Double(max(members, 1))
        if Double(senders) <= Double(members) * Self.senderFraction {
            if weSent {
                bandwidth *= Self.senderFraction
                count = Double(max(senders, 1))
            } else {
                bandwidth *= 1 - Self.senderFraction
                count = Double(max(members - senders, 1))
            }
        }
        return max(averagePacketSize * count / bandwidth, minimum(initial: initial))
    }

    /// The interval in seconds for a uniform draw `unit` in [0, 1]: `deterministic` times
    /// (unit + 0.5), divided by e - 3/2.
    public func randomized(_ unit: Double, initial: Bool = false) -> Double {
        deterministic(initial: initial) * (min(max(unit, 0), 1) + 0.5) / Self.compensation
    }
}

/// When a receiver's next regular RTCP report is due (RFC 3550 6.3.6, with timer
/// reconsideration): at the scheduled time a new interval is drawn from the current
/// parameters; the report goes if the last report time plus that interval has passed,
/// otherwise the report is put off to then. Reports sent early (a PLI) count as reports.
///
/// Pure: times in nanoseconds and the draws are passed in.
public struct RTCPReportSchedule: Sendable, Hashable {
    /// The interval's parameters; change them as members, bandwidth and packet sizes change.
    public var interval: RTCPReportInterval
    /// When the last report went (0: none yet).
    public private(set) var lastReport: Int64 = 0
    /// When the next report is due.
    public private(set) var next: Int64
    /// The interval last drawn, in seconds.
    public private(set) var lastInterval: Double

    /// Starts the schedule at `now` with the initial (halved minimum) interval.
    public init(interval: RTCPReportInterval, now: Int64, unit: Double) {
        self.interval = interval
        lastInterval = interval.randomized(unit, initial: true)
        next = now + Int64(lastInterval * 1e9)
    }

    /// At or after `next`: true when the report goes now (then call `reported`); false when
    /// reconsideration put it off (`next` moved).
    public mutating func reconsider(now: Int64, unit: Double) -> Bool {
        guard now >= next else { return false }
        guard lastReport != 0 else { return true }  // the first report goes at its (initial) time
        lastInterval = interval.randomized(unit)
        let due = lastReport + Int64(lastInterval * 1e9)
        guard due <= now else {
            next = due
            return false
        }
        return true
    }

    /// A report went at `now`: the next one is an interval (drawn with `unit`) later.
    public mutating func reported(now: Int64, unit: Double) {
        lastReport = now
        lastInterval = interval.randomized(unit)
        next = now + Int64(lastInterval * 1e9)
    }
}
