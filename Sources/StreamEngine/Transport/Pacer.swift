/// A token bucket: sends are released at `rateBitsPerSecond` with bursts of at most
/// `burstQuantum` bytes.
///
/// Over any interval of length t, what it releases is at most `burstQuantum + rate * t`.
/// The quantum is time-based by default (about 2 ms of the rate), so a GSO send never
/// turns into a burst that defeats pacing.
public struct Pacer: Sendable {
    /// The pacing rate in bits per second; nil for unpaced.
    public private(set) var rateBitsPerSecond: Double?
    /// The largest burst in bytes (the bucket's depth).
    public private(set) var burstQuantum: Int
    private var tokens: Double
    private var lastRefill: Int64

    /// The default quantum for a rate: 2 ms of it, at least `minimum` bytes, at most 64 KiB.
    public static func defaultQuantum(rateBitsPerSecond: Double, minimum: Int) -> Int {
        let twoMilliseconds = Int(rateBitsPerSecond / 8 * 0.002)
        return min(max(twoMilliseconds, minimum), 65_536)
    }

    /// The quantum of a fixed pace (a flow without a congestion controller): the default, but
    /// at least twenty-four datagrams of `datagram` bytes where a frame interval at 30 fps of
    /// the rate (33.3 ms) holds them (less where it does not), at most 64 KiB. A submission
    /// waits for half a quantum of budget, so at a few Mbit/s, where 2 ms of the rate is about
    /// one datagram, a frame went out one datagram per wake-up (a 5 Mbit/s stream at 30 fps:
    /// ~16 wake-ups per frame, each 20 – 47 µs of CPU on this project's VMs, results/profile.md
    /// section 43). A file's pace is 1.5 x its rate, so at 30 fps this holds one and a half
    /// frames of the average size: a frame up to that goes out in one burst, each a wake-up of
    /// the sender and, on arrival, of the receiver. With 20 ms of the rate (sixteen datagrams),
    /// less than an average frame there, a frame went out in 1.55 bursts, and this saves 12 – 17 %
    /// of the sender's CPU and 11 – 14 % of the receiver's (sections 45 and 47); with 10 ms in four
    /// (section 44). A fixed pace only smooths the stream's own bursts: larger frames,
    /// keyframes, go out at the pace; bursts stay within a frame interval of the rate (Chrome's
    /// pacer sends up to 40 ms of it early). Above ~130 Mbit/s 2 ms is more and rules. Behind a
    /// loaded bottleneck the sender's reports still find the queue as it is (`LabRTTTests`, by
    /// the router's timestamps: every report, −0.66 … +0.60 ms from its median over eleven
    /// runs, about two standard errors; section 47).
    public static func fixedPaceQuantum(rateBitsPerSecond: Double, datagram: Int) -> Int {
        let frameInterval = Int(rateBitsPerSecond / 8 / 30)
        let batchFloor = min(24 * datagram, frameInterval)
        return min(max(defaultQuantum(rateBitsPerSecond: rateBitsPerSecond, minimum: datagram), batchFloor), 65_536)
    }

    /// Makes a pacer. `rateBitsPerSecond` nil means unpaced.
    public init(rateBitsPerSecond: Double?, burstQuantum: Int, now: Int64) {
        precondition(burstQuantum > 0)
        self.rateBitsPerSecond = rateBitsPerSecond
        self.burstQuantum = burstQuantum
        self.tokens = Double(burstQuantum)
        self.lastRefill = now
    }

    /// Changes the rate (and quantum) from now on.
    public mutating func setRate(_ rateBitsPerSecond: Double?, burstQuantum: Int, now: Int64) {
        refill(now: now)
        self.rateBitsPerSecond = rateBitsPerSecond
        self.burstQuantum = burstQuantum
        tokens = min(tokens, Double(burstQuantum))
    }

    private mutating func refill(now: Int64) {
        guard let rate = rateBitsPerSecond, now > lastRefill else { return }
        tokens = min(Double(burstQuantum), tokens + Double(now - lastRefill) * rate / 8e9)
        lastRefill = now
    }

    /// Bytes that may go out now.
    public mutating func available(now: Int64) -> Int {
        guard rateBitsPerSecond != nil else { return Int.max }
        refill(now: now)
        return max(0, Int(tokens))
    }

    /// Nanoseconds until `bytes` may go out (0 when they may now).
    public mutating func delay(for bytes: Int, now: Int64) -> Int64 {
        guard let rate = rateBitsPerSecond else { return 0 }
        refill(now: now)
        let needed = Double(min(bytes, burstQuantum)) - tokens
        if needed <= 0 { return 0 }
        return Int64((needed * 8e9 / rate).rounded(.up))
    }

    /// Takes `bytes` that were just released.
    public mutating func consume(_ bytes: Int, now: Int64) {
        guard rateBitsPerSecond != nil else { return }
        refill(now: now)
        tokens -= Double(bytes)
    }
}
