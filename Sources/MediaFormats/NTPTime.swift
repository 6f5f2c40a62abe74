/// A 64-bit NTP timestamp (RFC 5905): seconds since 1900-01-01 in the upper 32 bits,
/// binary fraction of a second in the lower 32. Times are passed in; nothing here reads a clock.
public struct NTPTime: Sendable, Hashable, Comparable {
    /// Seconds from the NTP epoch (1900) to the Unix epoch (1970).
    public static let unixEpochOffset: Int64 = 2_208_988_800

    /// The 64-bit wire value.
    public var rawValue: UInt64

    /// Wraps a 64-bit wire value.
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    /// Converts a Unix time. Seconds are taken modulo 2^32 after adding the epoch
    /// offset (era 0 ends in 2036 and wraps); nanoseconds above 999,999,999 are clamped.
    public init(unixSeconds: Int64, nanoseconds: UInt32) {
        let ntpSeconds = UInt32(truncatingIfNeeded: unixSeconds &+ Self.unixEpochOffset)
        let nanos = UInt64(min(nanoseconds, 999_999_999))
        let fraction = (nanos << 32) / 1_000_000_000
        rawValue = UInt64(ntpSeconds) << 32 | fraction
    }

    /// Whole seconds since the NTP epoch (modulo 2^32).
    public var seconds: UInt32 { UInt32(truncatingIfNeeded: rawValue >> 32) }

    /// Fraction of a second in units of 2^-32 s.
    public var fraction: UInt32 { UInt32(truncatingIfNeeded: rawValue) }

    /// The Unix time this stands for, rounded to the nearest nanosecond. NTP seconds
    /// before the Unix epoch's NTP value are read as era 1 (2036-2106).
    public var unixTime: (seconds: Int64, nanoseconds: UInt32) {
        var unixSeconds = Int64(seconds) - Self.unixEpochOffset
        if unixSeconds < 0 { unixSeconds += 1 << 32 }
        let nanos = (UInt64(fraction) * 1_000_000_000 + (1 << 31)) >> 32
        return (unixSeconds, UInt32(min(nanos, 999_999_999)))
    }

    /// The middle 32 bits (16.16 fixed point seconds), as used in LSR, DLSR and RFC 8888.
    public var compact: UInt32 { UInt32(truncatingIfNeeded: rawValue >> 16) }

    /// Orders by wire value (valid within one NTP era).
    public static func < (lhs: NTPTime, rhs: NTPTime) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Round-trip time per RFC 3550 section 6.4.1: `arrival - LSR - DLSR`, all in compact
    /// NTP units (1/65536 s), with wrapping arithmetic. Returns nil when LSR is 0 (no SR
    /// received yet) or when DLSR exceeds the time since the SR was sent (clocks or
    /// fields are inconsistent, and the result would be negative).
    public static func roundTripTime(arrivalCompact: UInt32, lastSR: UInt32, delaySinceLastSR: UInt32) -> UInt32? {
        guard lastSR != 0 else { return nil }
        let sinceSR = arrivalCompact &- lastSR
        guard delaySinceLastSR <= sinceSR else { return nil }
        return sinceSR - delaySinceLastSR
    }

    /// Converts compact NTP units (1/65536 s) to microseconds.
    public static func microseconds(compact: UInt32) -> UInt64 {
        (UInt64(compact) * 1_000_000 + (1 << 15)) >> 16
    }
}
