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
    /// at least sixteen datagrams of `datagram` bytes where 20 ms of the rate holds them (less
    /// where it does not), at most 64 KiB. A submission waits for half a quantum of budget, so
    /// at a few Mbit/s, where 2 ms of the rate is about one datagram, a frame went out one
    /// datagram per wake-up (a 5 Mbit/s stream at 30 fps: ~16 wake-ups per frame, each 20 – 47
    /// µs of CPU on this project's VMs, results/profile.md section 43), and with 10 ms of the
    /// rate in four batches of three or four datagrams, each a wake-up of the sender and one of
    /// the receiver (section 44); with this, a frame of the average size goes out in one or two.
    /// A fixed pace only smooths the stream's own bursts (a file's pace is 1.5 x its rate:
    /// larger frames, keyframes, go out at the pace); bursts stay within 20 ms of the rate
    /// (Chrome's pacer sends up to 40 ms of it early). Above ~90 Mbit/s 2 ms is more and rules.
    /// Not more: a frame interval at 30 fps of the rate (33.3 ms, 24 datagrams) saved another
    /// 12 % of the sender's CPU and 11 % of the receiver's at 30 fps, but behind a loaded
    /// bottleneck its larger bursts let the sender's reports find the queue lower than it is by
    /// the router's timestamps (−0.43 ms on average, up to −0.96, against −0.13 with these;
    /// `LabRTTTests` allows 1 ms; results/profile.md sections 45 and 46).
    public static func fixedPaceQuantum(rateBitsPerSecond: Double, datagram: Int) -> Int {
        let twentyMilliseconds = Int(rateBitsPerSecond / 8 * 0.020)
        let batchFloor = min(16 * datagram, twentyMilliseconds)
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
