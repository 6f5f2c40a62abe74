import MediaFormats

extension MediaSenderConfig {
    /// What an SDP for this flow offers for loss recovery: RFC 4588 RTX on `rtxPayloadType`
    /// (or, with `rtxSameSSRC`, NACK feedback only: the originals come again on the media
    /// SSRC); nil without `retransmission` or feedback.
    public var sdpRetransmission: SDPSessionDescription.Retransmission? {
        guard retransmission && feedback else { return nil }
        return SDPSessionDescription.Retransmission(payloadType: rtxSameSSRC ? nil : rtxPayloadType,
                                                    rtxTime: Int(rtxTime.nanoseconds / 1_000_000))
    }
}
