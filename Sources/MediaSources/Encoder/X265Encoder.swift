import CX265
import MediaFormats

/// A live HEVC encoder over libx265: I420 frames in, ``AccessUnit``s out.
///
/// Configured for live streaming: tune `zerolatency` (no B-frames, no
/// lookahead, one access unit out per frame in), closed GOPs with an IDR every
/// ``EncoderConfig/keyframeInterval`` frames, VPS/SPS/PPS repeated before each
/// keyframe, one frame thread and a small worker pool, and no logging to stderr.
///
/// Rate control: x265 opens in ABR with VBV on (rate and buffer at
/// ``EncoderConfig/effectivePeakBitrateKbps``, HRD off), and from then on every
/// frame's QP comes from our own frame-level controller (`FrameRateController`,
/// passed as `x265_picture.forceqp`), which follows ``bitrateKbps``. So
/// ``setBitrate(kbps:)`` takes effect on the next frame, without a keyframe.
///
/// Not thread-safe: one encoder thread owns an instance. Keep it off the
/// network ring's thread so a slow frame never stalls sending. Its CPU time, and
/// its own threads', is counted in ``EncoderCPUTime``.
public final class X265Encoder {
    /// The configuration the encoder was opened with (``EncoderConfig/bitrateKbps``
    /// as at open; see ``bitrateKbps`` for the current value).
    public let config: EncoderConfig
    /// VPS, SPS and PPS NAL units (no start codes), for the SDP's
    /// `sprop-vps`, `sprop-sps` and `sprop-pps`. Calls `x265_encoder_headers`.
    public private(set) var headers: [[UInt8]]
    /// The current target bitrate in kbit/s (changed by ``setBitrate(kbps:)``).
    public private(set) var bitrateKbps: Int
    /// How the bitrate changes went (``setBitrate(kbps:)``).
    public private(set) var rateChanges = RateChangeCounts()
    /// The highest bitrate reachable without reopening: x265's VBV rate, fixed at open.
    public private(set) var peakBitrateKbps: Int
    /// Plans each frame's QP for ``bitrateKbps``.
    private var rateController: FrameRateController
    /// The QP forced on each frame x265 still holds, by pts.
    private var forcedQP: [Int64: Int] = [:]
    /// Frames passed in since the last keyframe, that one included (nil before the first).
    private var framesSinceKeyframe: Int?

    /// Counters of ``X265Encoder/setBitrate(kbps:)``.
    public struct RateChangeCounts: Sendable, Equatable {
        /// Calls that asked for a bitrate other than the current one.
        public var requested = 0
        /// Changes made live, with no keyframe.
        public var applied = 0
        /// Changes made by reopening the encoder (one IDR each), when the live path failed.
        public var fallbacks = 0
    }

    /// The parameters the encoder was opened with (x265 keeps its own copy).
    private var param: UnsafeMutablePointer<x265_param>
    private let inputPicture: UnsafeMutablePointer<x265_picture>
    private let outputPicture: UnsafeMutablePointer<x265_picture>
    private var encoder: OpaquePointer
    /// The name x265's threads of this encoder carry (``EncoderCPUTime``).
    private var threadName: String
    /// Index of the next frame passed in; also its x265 pts.
    private var nextFrameIndex: Int64 = 0
    /// x265 accepts no frame after a flush.
    private var isFlushed = false
    /// Set by a reopen: the next frame must be an IDR.
    private var forceNextKeyframe = false

    /// Opens an encoder. Throws ``EncoderError/invalidParameter(parameter:value:requirement:)``
    /// for an out-of-range configuration and other ``EncoderError``s when
    /// libx265 is missing or refuses the settings. Calls `x265_param_default_preset`,
    /// `x265_param_parse`, `x265_encoder_open` and `x265_encoder_headers`.
    public init(_ config: EncoderConfig) throws(EncoderError) {
        try config.validate()
        guard cx265_api_matches_header() != 0 else {
            throw .libraryUnavailable(detail: cx265_api() == nil
                ? "\(String(cString: cx265_library_name())) could not be loaded, or its x265_api_get(0) returned NULL (no 8-bit build?)"
                : "library build does not match x265.h build \(X265_BUILD)")
        }
        let (param, encoder, headers, threadName) = try Self.open(config)
        guard let inputPicture = cx265_picture_alloc(), let outputPicture = cx265_picture_alloc() else {
            // picture_alloc only fails when malloc does.
            fatalError("x265_picture_alloc: out of memory")
        }
        cx265_picture_init(param, inputPicture)
        cx265_picture_init(param, outputPicture)
        self.config = config
        self.bitrateKbps = config.bitrateKbps
        self.peakBitrateKbps = config.effectivePeakBitrateKbps
        self.rateController = FrameRateController(
            targetBitsPerSecond: Double(config.bitrateKbps) * 1000,
            frameRate: Double(config.fpsNumerator) / Double(config.fpsDenominator),
            keyframeInterval: config.keyframeInterval)
        self.param = param
        self.encoder = encoder
        self.threadName = threadName
        self.headers = headers
        self.inputPicture = inputPicture
        self.outputPicture = outputPicture
    }

    deinit {
        // Not api->cleanup: that tears down process-global state other encoders share.
        EncoderCPUTime.closing(threadName: threadName) { cx265_encoder_close(encoder) }
        cx265_picture_free(inputPicture)
        cx265_picture_free(outputPicture)
        cx265_param_free(param)
    }

    /// Encodes one frame; see ``encode(luma:cb:cr:forceKeyframe:)``.
    /// Throws ``EncoderError/frameSizeMismatch(expected:actual:)`` when the
    /// frame's size differs from the configuration.
    public func encode(_ frame: YUV420Frame, forceKeyframe: Bool = false) throws(EncoderError) -> AccessUnit? {
        guard frame.width == config.width, frame.height == config.height else {
            throw .frameSizeMismatch(expected: "\(config.width)x\(config.height)",
                                     actual: "\(frame.width)x\(frame.height)")
        }
        return try frame.withPlanes { (luma, cb, cr) throws(EncoderError) in
            try encode(luma: luma, cb: cb, cr: cr, forceKeyframe: forceKeyframe)
        }
    }

    /// Encodes one 8-bit I420 frame from three tightly packed planes
    /// (`width * height` luma bytes, `width/2 * height/2` bytes per chroma plane).
    ///
    /// Returns the access unit x265 finished, or nil when it holds the frame
    /// back (with tune `zerolatency` it returns this frame's unit). Its
    /// timestamp is the frame index on the 90 kHz clock. `forceKeyframe` makes
    /// this frame an IDR (for a picture-loss request or a new receiver).
    /// x265 copies the planes before returning. Calls `x265_encoder_encode`.
    public func encode(luma: UnsafeRawBufferPointer, cb: UnsafeRawBufferPointer, cr: UnsafeRawBufferPointer,
                       forceKeyframe: Bool = false) throws(EncoderError) -> AccessUnit? {
        guard !isFlushed else { throw .alreadyFlushed }
        let lumaCount = config.width * config.height
        let chromaCount = (config.width / 2) * (config.height / 2)
        guard luma.count == lumaCount, cb.count == chromaCount, cr.count == chromaCount,
              let lumaBase = luma.baseAddress, let cbBase = cb.baseAddress, let crBase = cr.baseAddress else {
            throw .frameSizeMismatch(
                expected: "\(config.width)x\(config.height) I420 (planes of \(lumaCount), \(chromaCount), \(chromaCount) bytes)",
                actual: "planes of \(luma.count), \(cb.count), \(cr.count) bytes")
        }
        cx265_picture_set_i420(inputPicture, lumaBase, cbBase, crBase,
                               Int32(config.width), Int32(config.width / 2))
        inputPicture.pointee.pts = nextFrameIndex
        let forced = forceKeyframe || forceNextKeyframe
        inputPicture.pointee.sliceType = forced ? X265_TYPE_IDR : X265_TYPE_AUTO
        forceNextKeyframe = false
        // x265 (closed GOP, no scene cuts) makes a keyframe when forced or at the interval,
        // counted in input frames as here.
        let keyframe = forced || framesSinceKeyframe.map { $0 >= config.keyframeInterval } ?? true
        framesSinceKeyframe = keyframe ? 1 : (framesSinceKeyframe ?? 0) + 1
        if let qp = rateController.nextQP(keyframe: keyframe) {
            inputPicture.pointee.forceqp = Int32(qp + 1)  // 0 would mean "x265 decides"
            forcedQP[nextFrameIndex] = qp
        } else {
            inputPicture.pointee.forceqp = 0
        }
        // The planes are borrowed for this call only.
        defer { cx265_picture_set_i420(inputPicture, nil, nil, nil, 0, 0) }
        nextFrameIndex += 1
        return try encodeStep(input: inputPicture)
    }

    /// Drains the frames x265 still holds (none with tune `zerolatency` and one
    /// frame thread) and ends the stream: later ``encode(_:forceKeyframe:)``
    /// calls throw ``EncoderError/alreadyFlushed``. Stops at the first error.
    /// Calls `x265_encoder_encode` with no input picture.
    public func flush() -> [AccessUnit] {
        isFlushed = true
        var units: [AccessUnit] = []
        while let unit = try? encodeStep(input: nil) {
            units.append(unit)
        }
        return units
    }

    /// Changes the target bitrate from the next frame on, without a keyframe.
    ///
    /// Up to ``peakBitrateKbps`` the change is live: the frame-level controller
    /// plans the next frame's QP for the new rate (counted in
    /// ``RateChangeCounts/applied``). Not through `x265_encoder_reconfig`:
    /// libx265 3.5 accepts a new bitrate there and returns 0, but its rate
    /// control never sees it (the reconfigured parameters go to a copy its
    /// `RateControl` does not read: `Encoder::configure` repoints the encoder's
    /// `m_param` at `m_latestParam` while `RateControl::m_param` keeps the block
    /// from open), so the output keeps the old rate.
    ///
    /// Above ``peakBitrateKbps`` x265's VBV, fixed at open, would cap the output,
    /// so the encoder is reopened with a VBV for the new rate: one IDR, VPS/SPS/PPS
    /// in band and ``headers`` updated, frame timestamps continuing (counted in
    /// ``RateChangeCounts/fallbacks``). On failure the old encoder keeps running at
    /// the old rate. The reopen calls `x265_encoder_open` and `x265_encoder_close`.
    public func setBitrate(kbps: Int) throws(EncoderError) {
        guard !isFlushed else { throw .alreadyFlushed }
        guard kbps > 0, kbps <= EncoderConfig.maxBitrateKbps else {
            throw .invalidParameter(parameter: "bitrateKbps", value: String(kbps),
                                    requirement: "in 1...\(EncoderConfig.maxBitrateKbps)")
        }
        guard kbps != bitrateKbps else { return }
        rateChanges.requested += 1
        guard kbps > peakBitrateKbps else {
            bitrateKbps = kbps
            rateController.setTarget(bitsPerSecond: Double(kbps) * 1000)
            rateChanges.applied += 1
            return
        }
        var newConfig = config
        newConfig.bitrateKbps = kbps
        newConfig.peakBitrateKbps = nil
        let (newParam, newEncoder, newHeaders, newThreadName) = try Self.open(newConfig)
        EncoderCPUTime.closing(threadName: threadName) { cx265_encoder_close(encoder) }
        cx265_param_free(param)
        (param, encoder, headers, threadName, bitrateKbps) = (newParam, newEncoder, newHeaders, newThreadName, kbps)
        peakBitrateKbps = newConfig.effectivePeakBitrateKbps
        rateController.setTarget(bitsPerSecond: Double(kbps) * 1000)
        forcedQP.removeAll()
        cx265_picture_init(param, inputPicture)
        cx265_picture_init(param, outputPicture)
        forceNextKeyframe = true
        rateChanges.fallbacks += 1
    }

    /// Runs one `x265_encoder_encode` (nil input: flush) and copies out the
    /// access unit, if any, before the next call reuses x265's NAL buffer.
    private func encodeStep(input: UnsafeMutablePointer<x265_picture>?) throws(EncoderError) -> AccessUnit? {
        var nals: UnsafeMutablePointer<x265_nal>?
        var nalCount: UInt32 = 0
        let result = EncoderCPUTime.measuring { cx265_encoder_encode(encoder, &nals, &nalCount, input, outputPicture) }
        guard result >= 0 else { throw .encodeFailed(code: result) }
        guard result > 0, nalCount > 0 else { return nil }
        let units = try Self.copyNALUnits(nals, count: nalCount)
        let isKeyframe = units.contains { HEVCNALUnitType(nalUnit: $0)?.isIRAP == true }
        let pts = outputPicture.pointee.pts
        let qp = forcedQP.removeValue(forKey: pts) ?? Int(outputPicture.pointee.frameData.qp.rounded())
        rateController.record(bits: 8 * units.reduce(0) { $0 + $1.count }, qp: qp, keyframe: isKeyframe)
        return AccessUnit(
            nalUnits: units,
            timestamp: Self.rtpTimestamp(frameIndex: outputPicture.pointee.pts,
                                         fpsNumerator: config.fpsNumerator,
                                         fpsDenominator: config.fpsDenominator),
            isKeyframe: isKeyframe)
    }

    /// The frame's time on the 90 kHz RTP clock, wrapping at 2^32.
    static func rtpTimestamp(frameIndex: Int64, fpsNumerator: Int, fpsDenominator: Int) -> UInt32 {
        let ticks = frameIndex * 90_000 * Int64(fpsDenominator) / Int64(fpsNumerator)
        return UInt32(truncatingIfNeeded: ticks)
    }

    // MARK: x265 glue

    /// A configured parameter set, the encoder opened with it, its headers and the name of
    /// its threads; nothing leaks when a step fails.
    private static func open(_ config: EncoderConfig) throws(EncoderError)
        -> (UnsafeMutablePointer<x265_param>, OpaquePointer, [[UInt8]], String) {
        guard let param = cx265_param_alloc() else { throw .openFailed(detail: "x265_param_alloc failed") }
        do throws(EncoderError) {
            try configure(param, config)
            let (opened, threadName) = EncoderCPUTime.opening { cx265_encoder_open(param) }
            guard let encoder = opened else {
                throw .openFailed(detail: "x265_encoder_open refused \(config.width)x\(config.height) "
                    + "at \(config.fpsNumerator)/\(config.fpsDenominator) fps, \(config.bitrateKbps) kbit/s, "
                    + "preset \(config.preset) (picture too small for the preset's CTU size?)")
            }
            do throws(EncoderError) {
                return (param, encoder, try readHeaders(encoder), threadName)
            } catch {
                EncoderCPUTime.closing(threadName: threadName) { cx265_encoder_close(encoder) }
                throw error
            }
        } catch {
            cx265_param_free(param)
            throw error
        }
    }

    /// Preset and tune, then every option the live stream relies on.
    private static func configure(_ param: UnsafeMutablePointer<x265_param>,
                                  _ config: EncoderConfig) throws(EncoderError) {
        let presetResult = config.tune.isEmpty
            ? cx265_param_default_preset(param, config.preset, nil)
            : cx265_param_default_preset(param, config.preset, config.tune)
        guard presetResult == 0 else {
            throw .invalidParameter(parameter: "preset/tune", value: "\(config.preset)/\(config.tune)",
                                    requirement: "an x265 preset (ultrafast...placebo) and tune (e.g. zerolatency)")
        }
        let options: [(String, String)] = [
            ("log-level", "none"),  // errors surface as EncoderError, not stderr noise
            ("input-res", "\(config.width)x\(config.height)"),
            ("input-csp", "i420"),
            ("fps", "\(config.fpsNumerator)/\(config.fpsDenominator)"),
            ("keyint", String(config.keyframeInterval)),
            ("min-keyint", String(config.keyframeInterval)),
            ("scenecut", "0"),  // keyframes only at the interval or when forced
            ("bframes", "0"),
            ("open-gop", "0"),  // every keyframe an IDR a late receiver can start at
            ("repeat-headers", "1"),
            ("annexb", "1"),
            ("info", "0"),  // no version SEI in the stream
            ("frame-threads", "1"),
            ("pools", config.workerThreads == 0 ? "none" : String(config.workerThreads)),
        ]
        for (name, value) in options {
            try parse(param, name, value)
        }
        try setRateControl(param, kbps: config.bitrateKbps, peakKbps: config.effectivePeakBitrateKbps)
        guard cx265_param_apply_profile(param, "main") == 0 else {
            throw .optionRejected(name: "profile", value: "main")
        }
    }

    /// ABR at `kbps` (x265's choice for a frame the controller has no QP for yet:
    /// the first), capped by a VBV at `peakKbps` with a one-second buffer, HRD off.
    /// The VBV is a ceiling, fixed for the encoder's life: the controller's QPs make the rate.
    private static func setRateControl(_ param: UnsafeMutablePointer<x265_param>, kbps: Int,
                                       peakKbps: Int) throws(EncoderError) {
        try parse(param, "bitrate", String(kbps))
        try parse(param, "vbv-maxrate", String(peakKbps))
        try parse(param, "vbv-bufsize", String(peakKbps))
        try parse(param, "hrd", "0")
    }

    private static func parse(_ param: UnsafeMutablePointer<x265_param>,
                              _ name: String, _ value: String) throws(EncoderError) {
        guard cx265_param_parse(param, name, value) == 0 else {
            throw .optionRejected(name: name, value: value)
        }
    }

    private static func readHeaders(_ encoder: OpaquePointer) throws(EncoderError) -> [[UInt8]] {
        var nals: UnsafeMutablePointer<x265_nal>?
        var nalCount: UInt32 = 0
        guard cx265_encoder_headers(encoder, &nals, &nalCount) >= 0 else {
            throw .openFailed(detail: "x265_encoder_headers failed")
        }
        return try copyNALUnits(nals, count: nalCount)
    }

    /// Copies x265's NAL units, stripping each Annex B start code (3 or 4 bytes).
    private static func copyNALUnits(_ nals: UnsafeMutablePointer<x265_nal>?,
                                     count: UInt32) throws(EncoderError) -> [[UInt8]] {
        guard let nals else { return [] }
        var units: [[UInt8]] = []
        units.reserveCapacity(Int(count))
        for nal in UnsafeBufferPointer(start: nals, count: Int(count)) {
            let payload = UnsafeRawBufferPointer(start: nal.payload, count: Int(nal.sizeBytes))
            guard let startCode = annexBStartCodeLength(payload), payload.count >= startCode + 2 else {
                throw .malformedOutput(detail: "NAL unit of type \(nal.type), \(nal.sizeBytes) bytes, "
                    + "without an Annex B start code and a 2-byte header")
            }
            units.append(Array(payload[startCode...]))
        }
        return units
    }

    /// 4 for `00 00 00 01`, 3 for `00 00 01`, nil otherwise.
    static func annexBStartCodeLength(_ bytes: UnsafeRawBufferPointer) -> Int? {
        if bytes.count >= 4, bytes[0] == 0, bytes[1] == 0, bytes[2] == 0, bytes[3] == 1 { return 4 }
        if bytes.count >= 3, bytes[0] == 0, bytes[1] == 0, bytes[2] == 1 { return 3 }
        return nil
    }
}

@available(*, unavailable, message: "X265Encoder belongs to one encoder thread")
extension X265Encoder: Sendable {}
