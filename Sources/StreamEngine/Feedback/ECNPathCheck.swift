import UringIO

/// What the path does to the ECN codepoint a flow sends, read from the codepoint its receiver
/// reports for each packet (RFC 8888): carried as sent (or marked CE), cleared to Not-ECT
/// (bleached: a hop that rewrites the TOS byte) or changed to the other ECT codepoint
/// (remarked: a hop that takes ECT(1) for ECT(0)). After RFC 9000's ECN validation
/// (section 13.4.2), decided over windows of reported packets, so a path that changes is seen.
///
/// A bleached path gives no ECN signal: the controller goes on by delay and loss. A path that
/// remarks ECT(1) to ECT(0) delivers the flow to classic ECN AQMs as a classic flow, whose CE
/// marks ask for a classic response (RFC 9331 section 4.3); the flow then sends ECT(0) and its
/// controller answers CE as it answers loss (`SenderFlow.takeECNVerdict`).
struct ECNPathCheck {
    /// The verdict on the path.
    enum Verdict: String, Sendable {
        /// The flow sends Not-ECT: nothing to check.
        case notECT = "none"
        /// Fewer than a window of the flow's packets reported yet.
        case testing
        /// Packets arrive with the codepoint sent, or CE.
        case capable
        /// Packets arrive Not-ECT.
        case bleached
        /// Packets arrive with the other ECT codepoint.
        case remarked
    }

    /// Reported packets a verdict is taken over.
    static let window = 16

    /// The codepoint the flow sends now.
    private(set) var sent: ECNCodepoint
    private(set) var verdict: Verdict
    /// Packets reported as sent, CE, Not-ECT (of ECT sent) and with the other ECT, since the start.
    private(set) var asSent = 0
    private(set) var ce = 0
    private(set) var bleached = 0
    private(set) var remarked = 0
    /// The current window's counts: carried (as sent or CE), bleached, remarked.
    private var windowCarried = 0
    private var windowBleached = 0
    private var windowRemarked = 0

    /// A check for a flow that sends `sent`.
    init(sent: ECNCodepoint) {
        self.sent = sent
        verdict = sent == .notECT ? .notECT : .testing
    }

    /// One packet reported received with `arrived`.
    @inline(__always)
    mutating func reported(_ arrived: ECNCodepoint) {
        guard sent != .notECT else { return }
        switch arrived {
        case sent: asSent += 1; windowCarried += 1
        case .ce: ce += 1; windowCarried += 1
        case .notECT: bleached += 1; windowBleached += 1
        default: remarked += 1; windowRemarked += 1
        }
        if windowCarried + windowBleached + windowRemarked == Self.window { decide() }
    }

    /// The flow sends `codepoint` from now on: a new verdict is taken from its packets.
    /// (Packets in flight, sent with the old one, are judged by the new one: the few a window
    /// holds can change one verdict at most.)
    mutating func sending(_ codepoint: ECNCodepoint) {
        sent = codepoint
        verdict = codepoint == .notECT ? .notECT : .testing
        windowCarried = 0
        windowBleached = 0
        windowRemarked = 0
    }

    /// The window's verdict: what most of its packets show.
    private mutating func decide() {
        if windowBleached * 2 > Self.window {
            verdict = .bleached
        } else if windowRemarked * 2 > Self.window {
            verdict = .remarked
        } else if windowCarried * 2 > Self.window {
            verdict = .capable
        }
        windowCarried = 0
        windowBleached = 0
        windowRemarked = 0
    }
}
