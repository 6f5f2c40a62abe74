import MediaFormats

/// Why a receiver dropped a datagram (or a payload): the keys of `ReceiverStats.rejected`.
///
/// The names in the stats JSON (`rtp.badVersion`, `foreignSSRC`, `payload.fragmentEmpty`...)
/// are given at the edge, by the command line's stats encoder.
public enum ReceiveRejection: Hashable, Sendable, CaseIterable {
    /// Not a valid RTP packet (`RTPHeader.parse` failed).
    case rtp(RTPPacketError)
    /// RTP from another address than the stream's (the first valid stream's, or `from`).
    case foreignSource
    /// RTP with another SSRC than the stream's.
    case foreignSSRC
    /// A path-MTU probe whose payload does not check.
    case badProbe
    /// RTP with another payload type than the stream's.
    case unexpectedPayloadType
    /// An RTP timestamp more than 10 s from the stream's clock, not followed in sequence on
    /// the new clock (a stream whose clock moved on takes the packet back).
    case timestampJump
    /// A sequence number too far from the stream's (`RTPSequenceTracker.Outcome.sequenceJump`).
    case sequenceJump
    /// RTCP from another host than the stream's sender (or before a stream was locked).
    case rtcpForeignSource
    /// A malformed packet in an RTCP datagram from the sender.
    case rtcp(RTCPParseError.Kind)
    /// An RFC 4588 retransmission too short to carry an original sequence number and payload.
    case badRetransmission
    /// A media payload the depacketizer could not read.
    case payload(HEVCPayloadRejection)

    /// Every reason, payload reasons last.
    public static var allCases: [ReceiveRejection] {
        RTPPacketError.allCases.map(ReceiveRejection.rtp)
            + [.foreignSource, .foreignSSRC, .badProbe, .unexpectedPayloadType, .timestampJump, .sequenceJump,
               .rtcpForeignSource, .badRetransmission]
            + RTCPParseError.Kind.allCases.map(ReceiveRejection.rtcp)
            + HEVCPayloadRejection.allCases.map(ReceiveRejection.payload)
    }
}
