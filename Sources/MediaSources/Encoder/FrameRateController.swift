import Glibc

/// Picks each frame's QP so that an encoder's output follows a target bitrate that may change
/// at any frame, with no keyframe and no help from the encoder's own rate control.
///
/// Why it exists: libx265 3.5's `x265_encoder_reconfig` accepts a new bitrate but never
/// reaches its rate control (see ``X265Encoder/setBitrate(kbps:)``), while a per-picture
/// forced QP takes effect on the very frame it is given to. So the application plans the
/// bits and x265 only codes at the QP it is told.
///
/// The plan: a keyframe gets ``keyframeShare`` average frames' worth of bits and the other
/// frames of its keyframe interval share the rest, so a second with a keyframe in it carries
/// about the same bits as one without. What the frames spent above or below the plan since
/// the last target change is paid back over ``paybackFrames`` frames.
///
/// The size model of inter frames: `log2(bits)` falls by `slope` per QP from an anchor (the
/// last frame's QP and its blended size). The slope starts at 1/6 (bits halve per +6 QP) and
/// is learned from consecutive frames at different QPs, because x265 ultrafast is far from
/// that rule on some content: on a zooming fractal a P-frame is 1-2 kbit at QP 41 and 50-90
/// kbit at QP 37, and a fixed 1/6 slope swings the QP across that cliff frame after frame.
/// Keyframes, rare, keep `log2(bits) = intercept - qp / 6`, learned from the last one.
///
/// Pure: sizes and QPs in, QPs out; no clock, no encoder.
struct FrameRateController {
    /// QPs the controller picks from (x265's 8-bit range).
    static let qpRange = 1...51
    /// A keyframe's bit budget, in average frames.
    static let keyframeShare = 4.0
    /// Frames over which a deviation from the plan is paid back (half a second at 30 fps).
    let paybackFrames: Double
    /// Frames per second.
    let frameRate: Double
    /// Frames from one keyframe to the next.
    let keyframeInterval: Int
    /// The target in bits per second.
    private(set) var targetBitsPerSecond: Double

    /// `log2(bits) + qp / 6` of the last keyframe; nil until one was seen.
    private var keyframeIntercept: Double?
    /// The inter frames' anchor: a QP and the model's `log2(bits)` there; nil until one was seen.
    private var interAnchor: (qp: Int, log2Bits: Double)?
    /// The last inter frame as measured, for the slope.
    private var lastInterFrame: (qp: Int, log2Bits: Double)?
    /// log2 of bits lost per QP step of inter frames.
    private(set) var slope = 1.0 / 6
    /// The slopes the model accepts (a measurement outside is content changing, not QP).
    static let slopeRange = (1.0 / 12)...1.5
    /// Bits spent minus bits planned since the last target change.
    private var debt = 0.0
    /// QP of the last frame that was not a keyframe.
    private var lastInterQP: Int?
    /// The target changed since the last frame was planned: the QP may jump.
    private var targetChanged = false
    /// Inter frames measured so far (up to 2): the first is the model's first measurement, and
    /// the frame after it may jump to where that puts the QP.
    private var interFramesMeasured = 0

    init(targetBitsPerSecond: Double, frameRate: Double, keyframeInterval: Int) {
        self.targetBitsPerSecond = targetBitsPerSecond
        self.frameRate = frameRate
        self.keyframeInterval = max(keyframeInterval, 1)
        self.paybackFrames = max(frameRate / 2, 2)
    }

    /// A new target from the next frame on; what the frames owed to the old one is forgiven.
    mutating func setTarget(bitsPerSecond: Double) {
        guard bitsPerSecond != targetBitsPerSecond else { return }
        targetBitsPerSecond = bitsPerSecond
        debt = 0
        targetChanged = true
    }

    /// The average frame's bits at the target.
    private var averageFrameBits: Double { targetBitsPerSecond / frameRate }

    /// The bits the plan gives a frame of that kind before any payback.
    func plannedBits(keyframe: Bool) -> Double {
        if keyframe || keyframeInterval == 1 { return Self.keyframeShare * averageFrameBits }
        let interval = Double(keyframeInterval)
        return averageFrameBits * max(interval - Self.keyframeShare, 1) / (interval - 1)
    }

    /// The QP for the next frame, or nil to let the encoder choose (before the model has seen a
    /// frame of any kind).
    mutating func nextQP(keyframe: Bool) -> Int? {
        let planned = plannedBits(keyframe: keyframe)
        let budget = keyframe
            ? planned
            : min(max(planned - debt / paybackFrames, planned / 4), planned * 4)
        let wanted = log2(max(budget, 1))
        var qp: Int
        if keyframe {
            // Before the first keyframe was measured, a keyframe costs about 6 inter frames.
            let intercept = keyframeIntercept
                ?? interAnchor.map { $0.log2Bits + Double($0.qp) / 6 + log2(6) }
            guard let intercept else { return nil }
            qp = Int((6 * (intercept - wanted)).rounded())
        } else {
            let anchor = interAnchor ?? keyframeIntercept.map { (qp: 0, log2Bits: $0 - log2(6)) }
            guard let anchor else { return nil }
            let anchorSlope = interAnchor == nil ? 1.0 / 6 : slope
            qp = anchor.qp + Int(((anchor.log2Bits - wanted) / anchorSlope).rounded())
            if let last = lastInterQP, !targetChanged, interFramesMeasured >= 2 {
                // Without a new target, steps stay small (about a 1.6 x change of bits): a
                // frame of unusual size moves the QP the next frames pay back, not the picture
                // quality all at once. Not yet after the first inter frame: that one was planned
                // on the guess that it costs a sixth of a keyframe (on noisy content it costs
                // two thirds, four times its plan), and stepping from there kept the next five
                // frames above plan (results/profile.md section 51).
                let step = max(1, Int(((4.0 / 6) / slope).rounded()))
                qp = min(max(qp, last - step), last + step)
            }
        }
        qp = Self.qpRange.clamped(qp)
        if !keyframe {
            lastInterQP = qp
            targetChanged = false
        }
        return qp
    }

    /// What the frame coded at `qp` cost; updates the model and the debt.
    mutating func record(bits: Int, qp: Int, keyframe: Bool) {
        let bits = Double(max(bits, 1))
        let measured = log2(bits)
        if keyframe {
            keyframeIntercept = measured + Double(qp) / 6
        } else {
            if let last = lastInterFrame, last.qp != qp {
                let step = (last.log2Bits - measured) / Double(qp - last.qp)
                if Self.slopeRange.contains(step) { slope = 0.7 * slope + 0.3 * step }
            }
            // The anchor moves to this QP: the model's size there, corrected toward the measured one.
            let predicted = interAnchor.map { $0.log2Bits - slope * Double(qp - $0.qp) } ?? measured
            interAnchor = (qp, 0.6 * predicted + 0.4 * measured)
            lastInterFrame = (qp, measured)
            lastInterQP = qp
            interFramesMeasured = min(interFramesMeasured + 1, 2)
        }
        // The debt is bounded by a second of bits: a target the QP range cannot reach must not
        // wind up a debt that takes seconds to unwind once it can.
        let limit = targetBitsPerSecond
        debt = min(max(debt + bits - plannedBits(keyframe: keyframe), -limit), limit)
    }
}
