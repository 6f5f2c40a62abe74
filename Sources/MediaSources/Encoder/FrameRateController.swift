import Foundation

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
/// the last target change is paid back over ``paybackFrames`` frames. The size model is
/// `log2(bits) = intercept - qp / 6` (bits roughly halve per +6 QP), one intercept for
/// keyframes and one for the other frames, each corrected by every frame's actual size.
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

    /// `log2(bits) + qp / 6` of keyframes and of other frames; nil until one was seen.
    private var keyframeIntercept: Double?
    private var interFrameIntercept: Double?
    /// Bits spent minus bits planned since the last target change.
    private var debt = 0.0
    /// QP of the last frame that was not a keyframe.
    private var lastInterQP: Int?
    /// The target changed since the last frame was planned: the QP may jump.
    private var targetChanged = false

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
        let intercept: Double?
        if keyframe {
            // Before the first keyframe was measured, a keyframe costs about 6 inter frames.
            intercept = keyframeIntercept ?? interFrameIntercept.map { $0 + log2(6) }
        } else {
            intercept = interFrameIntercept ?? keyframeIntercept.map { $0 - log2(6) }
        }
        guard let intercept else { return nil }
        var qp = Int((6 * (intercept - log2(max(budget, 1)))).rounded())
        if !keyframe, let last = lastInterQP, !targetChanged {
            // Without a new target, steps stay small: a frame of unusual size moves the QP
            // the next frames pay back, not the picture quality all at once.
            qp = min(max(qp, last - 4), last + 4)
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
        let observed = log2(bits) + Double(qp) / 6
        if keyframe {
            keyframeIntercept = observed
        } else {
            interFrameIntercept = interFrameIntercept.map { 0.6 * $0 + 0.4 * observed } ?? observed
            lastInterQP = qp
        }
        // The debt is bounded by a second of bits: a target the QP range cannot reach must not
        // wind up a debt that takes seconds to unwind once it can.
        let limit = targetBitsPerSecond
        debt = min(max(debt + bits - plannedBits(keyframe: keyframe), -limit), limit)
    }
}
