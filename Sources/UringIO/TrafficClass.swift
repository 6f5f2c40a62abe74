/// A service class, mapped to a DSCP per RFC 4594 / RFC 8837.
public enum ServiceClass: String, Sendable, CaseIterable {
    /// CS1: bulk, below best effort.
    case background
    /// CS0: best effort.
    case `default`
    /// AF41: interactive video.
    case video
    /// EF: interactive real-time (audio, the most urgent media).
    case realtime

    /// The 6-bit DSCP of this class.
    public var dscp: UInt8 {
        switch self {
        case .background: return 8   // CS1
        case .default: return 0      // CS0
        case .video: return 34       // AF41
        case .realtime: return 46    // EF
        }
    }
}

/// The two ECN bits of the IP header (RFC 3168).
public enum ECNCodepoint: UInt8, Sendable, CaseIterable {
    /// Not ECN-capable transport.
    case notECT = 0
    /// ECT(1) (L4S).
    case ect1 = 1
    /// ECT(0).
    case ect0 = 2
    /// Congestion experienced, set by the network.
    case ce = 3

    /// The spelling used on the command line and in stats (`off`, `ect0`, `ect1`, `ce`).
    public var name: String {
        switch self {
        case .notECT: return "off"
        case .ect0: return "ect0"
        case .ect1: return "ect1"
        case .ce: return "ce"
        }
    }
}

/// The whole TOS / traffic-class byte of one datagram: `DSCP << 2 | ECN`.
///
/// Set as one value per datagram: a per-packet `IP_TOS` cmsg overrides the socket's
/// TOS, so sending only the ECN bits would zero the DSCP.
public struct TrafficMark: Sendable, Hashable {
    /// The 6-bit DSCP.
    public var dscp: UInt8
    /// The ECN codepoint.
    public var ecn: ECNCodepoint

    /// Makes a mark from a DSCP (0...63) and an ECN codepoint.
    public init(dscp: UInt8, ecn: ECNCodepoint) {
        precondition(dscp < 64, "DSCP is 6 bits")
        self.dscp = dscp
        self.ecn = ecn
    }

    /// Makes a mark from a service class and an ECN codepoint.
    public init(_ serviceClass: ServiceClass, ecn: ECNCodepoint) {
        self.init(dscp: serviceClass.dscp, ecn: ecn)
    }

    /// Reads a received TOS byte.
    public init(tos: UInt8) {
        self.init(dscp: tos >> 2, ecn: ECNCodepoint(rawValue: Self.ecnBits(of: tos))!)
    }

    /// The ECN field (RFC 3168, the low two bits) of a TOS byte or traffic class, as a number,
    /// without making a mark: for per-packet paths that only pass it on.
    @inlinable public static func ecnBits(of tos: UInt8) -> UInt8 { tos & 0b11 }

    /// The TOS byte on the wire.
    public var tos: UInt8 { dscp << 2 | ecn.rawValue }
}
