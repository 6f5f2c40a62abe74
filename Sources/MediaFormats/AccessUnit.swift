/// One coded picture: the NAL units of one HEVC access unit, in decoding order,
/// each without its Annex B start code.
public struct AccessUnit: Sendable, Equatable {
    /// The NAL units, each starting with its two-byte NAL unit header.
    public var nalUnits: [[UInt8]] {
        didSet { byteCount = Self.byteCount(of: nalUnits) }
    }
    /// Presentation time on the 90 kHz RTP clock.
    public var timestamp: UInt32
    /// True when the access unit holds an IRAP picture (IDR, CRA, BLA): a decoder can start here.
    public var isKeyframe: Bool

    /// Makes an access unit from its NAL units (without start codes).
    public init(nalUnits: [[UInt8]], timestamp: UInt32, isKeyframe: Bool) {
        self.nalUnits = nalUnits
        self.byteCount = Self.byteCount(of: nalUnits)
        self.timestamp = timestamp
        self.isKeyframe = isKeyframe
    }

    /// The access unit's VPS, SPS and PPS NAL units, in order (the parameter sets an SDP
    /// carries); empty when it has none.
    public var parameterSets: [[UInt8]] {
        nalUnits.filter { HEVCNALUnitType(nalUnit: $0)?.isParameterSet == true }
    }

    /// Total bytes of all NAL units (no start codes). Kept with `nalUnits`, not summed on
    /// each read: the sender asks for it per datagram.
    public private(set) var byteCount: Int

    private static func byteCount(of nalUnits: [[UInt8]]) -> Int { nalUnits.reduce(0) { $0 + $1.count } }

    /// The access unit in Annex B form: each NAL unit behind a four-byte start code.
    public var annexB: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(byteCount + 4 * nalUnits.count)
        for nal in nalUnits {
            out.append(contentsOf: [0, 0, 0, 1])
            out.append(contentsOf: nal)
        }
        return out
    }
}

/// Where a source hands its access units: a sender, or a gate that passes them on once a
/// client plays. `StreamEngine`'s `MediaSender` and `RTSPMediaGate` conform; the sources of
/// `MediaSources` push into it, so neither module needs the other.
public protocol AccessUnitSink: AnyObject, Sendable {
    /// Hands over an access unit; false when it was dropped for lack of room.
    @discardableResult func send(_ accessUnit: AccessUnit) -> Bool
    /// No more access units will come.
    func finish()
    /// True (once) when the next picture should be a keyframe.
    func takeKeyframeRequest() -> Bool
    /// True when ``send(_:at:)`` holds an access unit back until its due time, so a source may
    /// hand over frames ahead of their time; false: it sends at once, and a source must hand
    /// each frame over at its time.
    var holdsUntilDue: Bool { get }
    /// Hands over an access unit that must not start on the wire before `dueTime` (monotonic
    /// nanoseconds, `CLOCK_MONOTONIC`; a time past: at once); false when it was dropped for
    /// lack of room.
    @discardableResult func send(_ accessUnit: AccessUnit, at dueTime: Int64) -> Bool
}

extension AccessUnitSink {
    /// A sink sends what it is handed at once (the default).
    public var holdsUntilDue: Bool { false }

    /// Without ``holdsUntilDue``, the due time is not kept: the access unit goes at once.
    @discardableResult public func send(_ accessUnit: AccessUnit, at dueTime: Int64) -> Bool { send(accessUnit) }
}
