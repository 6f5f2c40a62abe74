import MediaFormats
import Synchronization
import UringIO

extension MediaSender: AccessUnitSink {}

/// Counters of an RTSP server, as in the stats JSON's `rtsp` object.
public struct RTSPServerStats: Sendable, Equatable {
    /// TCP connections accepted.
    public var connections = 0
    /// Requests parsed.
    public var requests = 0
    /// Requests answered with an error status (4xx, 5xx), and malformed ones.
    public var rejected = 0
    /// The client that played (`host:port` of its RTP socket), once one has.
    public var client: String?
    /// Why the session ended: `teardown`, `closed`, `finished`, `stopped`, `error` (nil while it runs).
    public var ended: String?
}

/// Access units from a live source, held back until an RTSP client plays, then passed to
/// that client's `MediaSender`, starting at a keyframe (one is requested at PLAY).
///
/// With a frame limit, the sender is finished after that many access units and `isDone`
/// turns true, so the source can stop.
public final class RTSPMediaGate: AccessUnitSink {
    private struct State {
        var sender: MediaSender?
        var waitingForKeyframe = true
        var forwarded = 0
        var finished = false
        var stats = RTSPServerStats()
    }

    private let state = Mutex(State())
    private let keyframeWanted = Atomic<Bool>(false)
    private let frameLimit: Int?
    /// Signalled when the gate finishes, so the server stops waiting for a client.
    let wake: WakeEvent

    init(frameLimit: Int?, wake: WakeEvent) {
        self.frameLimit = frameLimit
        self.wake = wake
    }

    /// Passes the access unit to the playing client's sender; drops it while none plays,
    /// or until the first keyframe after PLAY.
    @discardableResult
    public func send(_ accessUnit: AccessUnit) -> Bool {
        let target = state.withLock { state -> MediaSender? in
            guard let sender = state.sender, !state.finished,
                  accessUnit.isKeyframe || !state.waitingForKeyframe else { return nil }
            state.waitingForKeyframe = false
            state.forwarded += 1
            if let frameLimit, state.forwarded >= frameLimit { state.finished = true }
            return sender
        }
        guard let target else { return true }
        let accepted = target.send(accessUnit)
        if isDone { target.finish() }
        return accepted
    }

    /// The source ended (or the command is stopping): the playing sender finishes what it
    /// has, and a server still waiting for a client stops waiting.
    public func finish() {
        let sender = state.withLock { state -> MediaSender? in
            state.finished = true
            return state.sender
        }
        sender?.finish()
        wake.signal()
    }

    /// True once at PLAY (so the client starts at a keyframe), and whenever the playing
    /// sender asks for one.
    public func takeKeyframeRequest() -> Bool {
        let sender = state.withLock { $0.sender }
        let fromSender = sender?.takeKeyframeRequest() ?? false
        return keyframeWanted.exchange(false, ordering: .relaxed) || fromSender
    }

    /// True when the frame limit was reached or `finish` was called: the source can stop.
    public var isDone: Bool { state.withLock { $0.finished } }

    /// The playing client's sender counters (zeros before a client plays).
    public var senderStats: SenderStats { state.withLock { $0.sender }?.stats ?? SenderStats() }

    /// The server's counters.
    public var serverStats: RTSPServerStats { state.withLock { $0.stats } }

    func updateStats(_ body: (inout RTSPServerStats) -> Void) { state.withLock { body(&$0.stats) } }

    /// Starts passing access units to `sender` (at the next keyframe, which is requested).
    func play(_ sender: MediaSender) {
        let finishedAlready = state.withLock { state -> Bool in
            state.sender = sender
            state.waitingForKeyframe = true
            return state.finished
        }
        keyframeWanted.store(true, ordering: .relaxed)
        if finishedAlready { sender.finish() }
    }
}
