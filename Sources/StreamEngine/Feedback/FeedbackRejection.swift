import MediaFormats

/// Why a sender dropped (part of) an RTCP datagram from its receiver: the keys of
/// `SenderStats.feedbackRejected`. The names in the stats JSON are given by the command
/// line's stats encoder.
public enum FeedbackRejection: Hashable, Sendable, CaseIterable {
    /// A malformed packet in the compound RTCP datagram.
    case rtcp(RTCPParseError.Kind)
    /// Per-packet feedback that confirms a packet this flow never sent (or no longer remembers).
    case confirmsUnsentPacket

    /// Every reason.
    public static var allCases: [FeedbackRejection] {
        RTCPParseError.Kind.allCases.map(FeedbackRejection.rtcp) + [.confirmsUnsentPacket]
    }
}
