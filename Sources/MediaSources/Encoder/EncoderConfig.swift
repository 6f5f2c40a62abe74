/// Settings of a live HEVC encoder (``X265Encoder``).
///
/// Defaults suit live streaming on a small machine: preset `ultrafast`, tune
/// `zerolatency` (one access unit out per frame in), a keyframe every two
/// seconds, two worker threads.
public struct EncoderConfig: Sendable, Equatable {
    /// Largest accepted width or height, in pixels.
    public static let maxDimension = 8192
    /// Largest accepted frame rate, in frames per second.
    public static let maxFrameRate = 1000
    /// Largest accepted bitrate, in kbit/s (HEVC level 6.2, high tier).
    public static let maxBitrateKbps = 800_000
    /// Bitrates the encoder accepts, in kbit/s: 1...``maxBitrateKbps``.
    public static let bitrateRangeKbps = 1...maxBitrateKbps
    /// Largest accepted keyframe interval, in frames (10 s at 60 fps): a receiver
    /// joining late must be able to start decoding within bounded time.
    public static let maxKeyframeInterval = 600
    /// Largest accepted number of worker threads.
    public static let maxWorkerThreads = 16

    /// Picture width in pixels: even, 2...``maxDimension``.
    public var width: Int
    /// Picture height in pixels: even, 2...``maxDimension``.
    public var height: Int
    /// Frame rate numerator (frames per `fpsDenominator` seconds), positive.
    public var fpsNumerator: Int
    /// Frame rate denominator, positive (1001 for NTSC rates such as 30000/1001).
    public var fpsDenominator: Int
    /// Target bitrate in kbit/s at open (``X265Encoder/setBitrate(kbps:)`` changes it later).
    public var bitrateKbps: Int
    /// The highest bitrate ``X265Encoder/setBitrate(kbps:)`` can reach without reopening the
    /// encoder, in kbit/s: x265's VBV rate and buffer (one second), which it fixes at open.
    /// nil: four times ``bitrateKbps``, at most ``maxBitrateKbps``.
    public var peakBitrateKbps: Int?
    /// Frames from one keyframe (IDR) to the next, 1...``maxKeyframeInterval``.
    public var keyframeInterval: Int
    /// x265 preset name ("ultrafast" ... "placebo").
    public var preset: String
    /// x265 tune name; "zerolatency" gives one access unit per input frame.
    /// An empty string means no tune.
    public var tune: String
    /// Threads in x265's worker pool (0: no pool, everything on the calling
    /// thread). Kept small so the encoder stays polite on a two-core machine.
    public var workerThreads: Int

    /// Makes a configuration. `keyframeInterval` defaults to two seconds of
    /// frames, clamped to 1...``maxKeyframeInterval``.
    public init(width: Int, height: Int,
                fpsNumerator: Int = 30, fpsDenominator: Int = 1,
                bitrateKbps: Int, peakBitrateKbps: Int? = nil,
                keyframeInterval: Int? = nil,
                preset: String = "ultrafast", tune: String = "zerolatency",
                workerThreads: Int = 2) {
        self.width = width
        self.height = height
        self.fpsNumerator = fpsNumerator
        self.fpsDenominator = fpsDenominator
        self.bitrateKbps = bitrateKbps
        self.peakBitrateKbps = peakBitrateKbps
        self.keyframeInterval = keyframeInterval
            ?? Self.defaultKeyframeInterval(fpsNumerator: fpsNumerator, fpsDenominator: fpsDenominator)
        self.preset = preset
        self.tune = tune
        self.workerThreads = workerThreads
    }

    /// ``peakBitrateKbps`` or its default, never below ``bitrateKbps``.
    public var effectivePeakBitrateKbps: Int {
        max(peakBitrateKbps ?? min(4 * bitrateKbps, Self.maxBitrateKbps), bitrateKbps)
    }

    /// Two seconds of frames at the given rate, clamped to 1...``maxKeyframeInterval``.
    public static func defaultKeyframeInterval(fpsNumerator: Int, fpsDenominator: Int) -> Int {
        guard fpsNumerator > 0, fpsDenominator > 0 else { return 1 }
        let twoSeconds = (2 * fpsNumerator + fpsDenominator / 2) / fpsDenominator
        return min(max(twoSeconds, 1), maxKeyframeInterval)
    }

    /// Throws ``EncoderError/invalidParameter(parameter:value:requirement:)``
    /// naming the first property out of range.
    public func validate() throws(EncoderError) {
        for (name, value) in [("width", width), ("height", height)] {
            guard value > 0, value % 2 == 0, value <= Self.maxDimension else {
                throw .invalidParameter(parameter: name, value: String(value),
                                        requirement: "even and in 2...\(Self.maxDimension)")
            }
        }
        let fps = "\(fpsNumerator)/\(fpsDenominator)"
        guard fpsNumerator > 0, fpsDenominator > 0 else {
            throw .invalidParameter(parameter: "fps", value: fps,
                                    requirement: "a positive numerator over a positive denominator")
        }
        guard fpsNumerator / fpsDenominator <= Self.maxFrameRate else {
            throw .invalidParameter(parameter: "fps", value: fps, requirement: "at most \(Self.maxFrameRate)")
        }
        guard bitrateKbps > 0, bitrateKbps <= Self.maxBitrateKbps else {
            throw .invalidParameter(parameter: "bitrateKbps", value: String(bitrateKbps),
                                    requirement: "in 1...\(Self.maxBitrateKbps)")
        }
        if let peakBitrateKbps, !(bitrateKbps...Self.maxBitrateKbps).contains(peakBitrateKbps) {
            throw .invalidParameter(parameter: "peakBitrateKbps", value: String(peakBitrateKbps),
                                    requirement: "in \(bitrateKbps) (the bitrate)...\(Self.maxBitrateKbps)")
        }
        guard keyframeInterval >= 1, keyframeInterval <= Self.maxKeyframeInterval else {
            throw .invalidParameter(parameter: "keyframeInterval", value: String(keyframeInterval),
                                    requirement: "in 1...\(Self.maxKeyframeInterval) frames")
        }
        guard workerThreads >= 0, workerThreads <= Self.maxWorkerThreads else {
            throw .invalidParameter(parameter: "workerThreads", value: String(workerThreads),
                                    requirement: "in 0...\(Self.maxWorkerThreads)")
        }
    }
}

extension ClosedRange {
    /// `value`, moved into the range when it lies outside.
    func clamped(_ value: Bound) -> Bound { Swift.min(Swift.max(value, lowerBound), upperBound) }
}
