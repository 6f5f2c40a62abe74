import MediaFormats
import StreamEngine

/// A reason whose count appears in the stats JSON under a stable key.
protocol StatsKeyed: Hashable {
    /// The key in the stats JSON.
    var statsKey: String { get }
}

extension ReceiveRejection: StatsKeyed {
    /// The receiver's `rejected` keys: `rtp.<RTPPacketError.reason>`, `rtcp.<RTCPParseError.reason>`,
    /// `payload.<HEVCPayloadRejection.rawValue>`, and the stream's own checks bare.
    var statsKey: String {
        switch self {
        case .rtp(let error): "rtp." + error.reason
        case .foreignSource: "foreignSource"
        case .foreignSSRC: "foreignSSRC"
        case .badProbe: "badProbe"
        case .unexpectedPayloadType: "unexpectedPayloadType"
        case .timestampJump: "timestampJump"
        case .sequenceJump: "sequenceJump"
        case .rtcpForeignSource: "rtcp.foreignSource"
        case .rtcp(let kind): "rtcp." + kind.rawValue
        case .payload(let reason): "payload." + reason.rawValue
        }
    }
}

extension FeedbackRejection: StatsKeyed {
    /// The sender's `feedback.rejected` keys: `<RTCPParseError.reason>` bare, and `confirmsUnsentPacket`.
    var statsKey: String {
        switch self {
        case .rtcp(let kind): kind.rawValue
        case .confirmsUnsentPacket: "confirmsUnsentPacket"
        }
    }
}

extension Dictionary where Key: StatsKeyed, Value == Int {
    /// The counts under their stats JSON keys.
    var byStatsKey: [String: Int] {
        Dictionary<String, Int>(uniqueKeysWithValues: map { ($0.key.statsKey, $0.value) })
    }
}
