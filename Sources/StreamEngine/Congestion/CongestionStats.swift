/// What a flow's congestion controller says and what the flow did about it (`SenderStats.congestion`).
public struct CongestionStats: Sendable, Equatable {
    /// The controller: `scream`, or `custom` for one the application plugged in.
    public var controller = ""
    /// The flow obeys the controller now. False until the receiver's first per-packet (RFC 8888)
    /// report (a third-party receiver sends none, or only receiver reports) and while it is gone:
    /// the flow then paces at `MediaSenderConfig.paceBitsPerSecond` under its unconfirmed bound, as
    /// without a controller, and the target announced is the controller's first (or, once it was
    /// obeyed, the last one announced).
    public var active = false
    /// The bitrate the source should produce, bits per second: the media's target under the
    /// controller's (`controllerTarget` less room for retransmissions and for frames waiting
    /// long, `MediaRateControl`) as last announced (`SenderEvent.targetBitrate`), which happens
    /// when it moved by
    /// `MediaSenderConfig.targetBitrateStep` or more (at most every `targetBitrateInterval`, but
    /// for a large cut).
    public var targetBitrate = 0
    /// The controller's own target now, bits per second: the window over the feedback delay.
    /// The media's (`targetBitrate`) leaves room for retransmissions and is lower while frames
    /// wait long in the flow's queue (`MediaRateControl`).
    public var controllerTarget = 0
    /// How long the oldest frame not yet started has waited in the flow's queue, behind the
    /// one being sent, milliseconds (0 when none waits).
    public var senderQueueMs = 0.0
    /// The bytes the controller lets be in flight.
    public var window = 0
    /// The bytes in flight as the controller counts them.
    public var bytesInFlight = 0
    /// The rate the flow is paced at, bits per second.
    public var pacingRate = 0
    /// The controller's queue delay estimate, milliseconds (nil when it has none).
    public var queueDelayMs: Double?
    /// Of the packets confirmed since the previous publication that confirmed any, the
    /// fraction reported CE-marked.
    public var ceFraction = 0.0
    /// Target bitrates announced after the first (each a `SenderEvent.targetBitrate`).
    public var rateChanges = 0
    /// Frames dropped whole because they waited longer than `MediaSenderConfig.maxFrameWait`
    /// for the path (and those after them until a keyframe).
    public var framesDropped = 0
    /// The controller's count of losses (declared, found to be reordering, cuts undone) and its
    /// reorder window; nil when it keeps none.
    public var losses: CongestionLossCounts?
    /// The controller's competitive mode (in it now, times begun, probes, times ended); nil
    /// when it has none.
    public var competition: CongestionCompetition?
    /// The rate at which the path's bottleneck delivered the flow's packets while a queue stood
    /// before them, bits per second (`CongestionController.bottleneckRate`); nil when the
    /// controller measures none or has not in its base delay window.
    public var bottleneckRate: Int?

    /// Empty stats.
    public init() {}
}
