/// One coded picture: the NAL units of one HEVC access unit, in decoding order,
/// each without its Annex B start code.
public struct AccessUnit: Sendable, Equatable {
    /// The NAL units, each starting with its two-byte NAL unit header, as arrays of their own.
    ///
    /// Made from ``nalUnitSlices`` on each read: a NAL unit that is a whole array is not copied,
    /// one that slices a larger buffer (a file source's read chunk) is. For cold paths
    /// (recording, tests); the packetizer reads ``nalUnitSlices``.
    public var nalUnits: [[UInt8]] {
        get { nalUnitSlices.map { Array($0) } }
        set { nalUnitSlices = newValue.map { $0[...] } }
    }
    /// The NAL units, each starting with its two-byte NAL unit header, as slices: of arrays of
    /// their own, or of a buffer shared with other access units (a file source splits each
    /// chunk it reads into slices of it, and the chunk lives as long as one of them). Slices
    /// keep the indices of what they slice: `nal[nal.startIndex]` is the first byte.
    public var nalUnitSlices: [ArraySlice<UInt8>] {
        didSet { byteCount = Self.byteCount(of: nalUnitSlices) }
    }
    /// Presentation time on the 90 kHz RTP clock.
    public var timestamp: UInt32
    /// True when the access unit holds an IRAP picture (IDR, CRA, BLA): a decoder can start here.
    public var isKeyframe: Bool

    /// Makes an access unit from its NAL units (without start codes).
    public init(nalUnits: [[UInt8]], timestamp: UInt32, isKeyframe: Bool) {
        self.init(nalUnitSlices: nalUnits.map { $0[...] }, timestamp: timestamp, isKeyframe: isKeyframe)
    }

    /// Makes an access unit from its NAL units (without start codes) as slices, which may
    /// share one buffer: it stays alive while the access unit does.
    public init(nalUnitSlices: [ArraySlice<UInt8>], timestamp: UInt32, isKeyframe: Bool) {
        self.nalUnitSlices = nalUnitSlices
        self.byteCount = Self.byteCount(of: nalUnitSlices)
        self.timestamp = timestamp
        self.isKeyframe = isKeyframe
    }

    /// The access unit's VPS, SPS and PPS NAL units, in order (the parameter sets an SDP
    /// carries); empty when it has none.
    public var parameterSets: [[UInt8]] {
        nalUnitSlices.filter { HEVCNALUnitType(nalUnit: $0)?.isParameterSet == true }.map { Array($0) }
    }

    /// Total bytes of all NAL units (no start codes). Kept with `nalUnitSlices`, not summed
    /// on each read: the sender asks for it per datagram.
    public private(set) var byteCount: Int

    private static func byteCount(of nalUnits: [ArraySlice<UInt8>]) -> Int { nalUnits.reduce(0) { $0 + $1.count } }

    /// The access unit in Annex B form: each NAL unit behind a four-byte start code.
    public var annexB: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(byteCount + 4 * nalUnitSlices.count)
        for nal in nalUnitSlices {
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
