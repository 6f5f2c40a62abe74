import MediaFormats
import Testing
@testable import MediaSources

/// Encoder tests run one at a time: each x265 encoder has its own worker pool
/// and the test machines have two cores.
@Suite(.serialized)
struct X265EncoderTests {
    static let width = 320
    static let height = 240

    static func config(bitrateKbps: Int = 500, keyframeInterval: Int? = nil) -> EncoderConfig {
        EncoderConfig(width: width, height: height, fpsNumerator: 30, fpsDenominator: 1,
                      bitrateKbps: bitrateKbps, keyframeInterval: keyframeInterval)
    }

    static func nalType(_ nal: [UInt8]) -> HEVCNALUnitType { HEVCNALUnitType(nalUnit: nal)! }

    /// Encodes `count` synthetic frames, forcing keyframes at `forced`, then flushes.
    static func encode(_ encoder: X265Encoder, frames count: Int, startingAt first: Int = 0,
                       forced: Set<Int> = []) throws -> [AccessUnit] {
        let source = SyntheticSource(width: width, height: height)
        var frame = source.frame(at: first)
        var units: [AccessUnit] = []
        for index in first..<(first + count) {
            source.render(frameIndex: index, into: &frame)
            if let unit = try encoder.encode(frame, forceKeyframe: forced.contains(index)) {
                units.append(unit)
            }
        }
        return units
    }

    @Test func sixtyFramesGiveSixtyAccessUnitsWithHeadersFirst() throws {
        let encoder = try X265Encoder(Self.config(keyframeInterval: 30))
        var units = try Self.encode(encoder, frames: 60)
        #expect(units.count == 60, "zerolatency: one access unit per frame in, got \(units.count)")
        units += encoder.flush()
        try #require(units.count == 60)

        let first = units[0]
        #expect(first.isKeyframe)
        let types = first.nalUnits.map(Self.nalType)
        #expect(Array(types.prefix(3)) == [.vps, .sps, .pps], "VPS, SPS, PPS first, got \(types)")
        #expect(types.contains { $0 == .idrWithRADL || $0 == .idrNoLP }, "IDR slice in \(types)")

        // Timestamps step by 90000 / 30 on the 90 kHz clock.
        for (index, unit) in units.enumerated() {
            #expect(unit.timestamp == UInt32(index * 3000))
        }
    }

    @Test func headersAreVPSSPSPPS() throws {
        let encoder = try X265Encoder(Self.config())
        #expect(encoder.headers.map(Self.nalType) == [.vps, .sps, .pps])
        // The same parameter sets lead the first keyframe (repeat-headers).
        let first = try #require(try Self.encode(encoder, frames: 1).first)
        #expect(Array(first.nalUnits.prefix(3)) == encoder.headers)
    }

    @Test func keyframesComeAtTheConfiguredInterval() throws {
        let encoder = try X265Encoder(Self.config(keyframeInterval: 12))
        let units = try Self.encode(encoder, frames: 50) + encoder.flush()
        try #require(units.count == 50)
        let keyframes = units.indices.filter { units[$0].isKeyframe }
        #expect(keyframes == [0, 12, 24, 36, 48])
        for index in keyframes {
            // Closed GOP: every keyframe is an IDR, led by fresh parameter sets.
            let types = units[index].nalUnits.map(Self.nalType)
            #expect(Array(types.prefix(3)) == [.vps, .sps, .pps], "frame \(index): \(types)")
            #expect(types.allSatisfy { !$0.isVCL || $0 == .idrWithRADL || $0 == .idrNoLP }, "frame \(index): \(types)")
        }
    }

    @Test func defaultKeyframeIntervalIsTwoSeconds() {
        #expect(Self.config().keyframeInterval == 60)
        #expect(EncoderConfig(width: 64, height: 64, fpsNumerator: 30000, fpsDenominator: 1001,
                              bitrateKbps: 100).keyframeInterval == 60)
        #expect(EncoderConfig(width: 64, height: 64, fpsNumerator: 1000, fpsDenominator: 1,
                              bitrateKbps: 100).keyframeInterval == EncoderConfig.maxKeyframeInterval)
    }

    @Test func forcedKeyframeLandsOnThatFrame() throws {
        let encoder = try X265Encoder(Self.config(keyframeInterval: 100))
        let units = try Self.encode(encoder, frames: 20, forced: [7]) + encoder.flush()
        try #require(units.count == 20)
        #expect(units.indices.filter { units[$0].isKeyframe } == [0, 7])
        #expect(units[7].nalUnits.map(Self.nalType).contains { $0.isIRAP })
        #expect(units[7].timestamp == 7 * 3000)
    }

    @Test func everyNALUnitHasAValidHeader() throws {
        let encoder = try X265Encoder(Self.config(keyframeInterval: 10))
        let units = try Self.encode(encoder, frames: 25, forced: [13]) + encoder.flush()
        for unit in units {
            #expect(!unit.nalUnits.isEmpty)
            for nal in unit.nalUnits {
                try #require(nal.count >= 3)
                #expect(nal[0] & 0x80 == 0, "forbidden_zero_bit set")
                let type = Self.nalType(nal).rawValue
                // VCL 0...9 (no reserved), IRAP 16...21, parameter sets, AUD, EOS, EOB, FD, SEI 32...40.
                #expect((0...9).contains(type) || (16...21).contains(type) || (32...40).contains(type),
                        "NAL type \(type)")
                #expect(((nal[0] & 1) << 5) | (nal[1] >> 3) == 0, "nuh_layer_id must be 0")
                #expect(nal[1] & 7 != 0, "nuh_temporal_id_plus1 must not be 0")
                // Start codes stripped: no leading 00 00 01 left over.
                #expect(!(nal[0] == 0 && nal[1] == 0))
            }
        }
    }

    @Test func bitrateChangeChangesOutputSize() throws {
        let encoder = try X265Encoder(Self.config(bitrateKbps: 300, keyframeInterval: 300))
        // Skip the keyframe and let rate control settle before measuring.
        let low = try Self.encode(encoder, frames: 30)
        try encoder.setBitrate(kbps: 3000)
        #expect(encoder.bitrateKbps == 3000)
        let high = try Self.encode(encoder, frames: 30, startingAt: 30)
        try #require(low.count == 30 && high.count == 30)
        // 3000 is above the peak of an encoder opened at 300 (4 x 300): the change reopens the
        // encoder, an IDR with in-band parameter sets, timestamps continue.
        #expect(encoder.rateChanges.fallbacks == 1)
        #expect(high[0].isKeyframe)
        #expect(Array(high[0].nalUnits.prefix(3)) == encoder.headers)
        #expect(high[0].timestamp == 30 * 3000)
        #expect(!high.dropFirst().contains { $0.isKeyframe })

        let lowBytes = low.dropFirst(10).reduce(0) { $0 + $1.byteCount }
        let highBytes = high.dropFirst(10).reduce(0) { $0 + $1.byteCount }
        #expect(highBytes > 3 * lowBytes, "300 kbit/s: \(lowBytes) bytes, 3000 kbit/s: \(highBytes) bytes in 20 frames")
        // 20 frames at 30 fps and 300 kbit/s is 25 kB; allow VBV slack but no runaway.
        #expect(lowBytes < 2 * 25_000, "300 kbit/s produced \(lowBytes) bytes in 20 frames")

        // And back down, live this time (under the new peak): no keyframe.
        try encoder.setBitrate(kbps: 300)
        let lowAgain = try Self.encode(encoder, frames: 30, startingAt: 60)
        #expect(!lowAgain.contains { $0.isKeyframe })
        #expect(encoder.rateChanges == .init(requested: 2, applied: 1, fallbacks: 1))
        let lowAgainBytes = lowAgain.dropFirst(10).reduce(0) { $0 + $1.byteCount }
        #expect(3 * lowAgainBytes < highBytes, "back at 300 kbit/s: \(lowAgainBytes) bytes in 20 frames")
    }

    @Test func invalidConfigurationsNameTheParameter() {
        func parameter(_ config: EncoderConfig) -> String? {
            do {
                _ = try X265Encoder(config)
                return nil
            } catch {
                guard case let .invalidParameter(parameter, _, _) = error else { return "other: \(error)" }
                return parameter
            }
        }
        func make(width: Int = 320, height: Int = 240, fps: (Int, Int) = (30, 1),
                  kbps: Int = 500, keyint: Int? = nil) -> EncoderConfig {
            EncoderConfig(width: width, height: height, fpsNumerator: fps.0, fpsDenominator: fps.1,
                          bitrateKbps: kbps, keyframeInterval: keyint)
        }
        #expect(parameter(make(width: 321)) == "width")
        #expect(parameter(make(width: 0)) == "width")
        #expect(parameter(make(width: 8194)) == "width")
        #expect(parameter(make(height: 239)) == "height")
        #expect(parameter(make(height: -2)) == "height")
        #expect(parameter(make(height: 8200)) == "height")
        #expect(parameter(make(fps: (0, 1))) == "fps")
        #expect(parameter(make(fps: (30, 0))) == "fps")
        #expect(parameter(make(fps: (-30, 1))) == "fps")
        #expect(parameter(make(kbps: 0)) == "bitrateKbps")
        #expect(parameter(make(kbps: -1)) == "bitrateKbps")
        #expect(parameter(make(keyint: 0)) == "keyframeInterval")
        #expect(parameter(make(keyint: 100_000)) == "keyframeInterval")

        let error = EncoderError.invalidParameter(parameter: "width", value: "321", requirement: "even")
        #expect(error.description.contains("width"))
        #expect(error.description.contains("321"))
    }

    @Test func invalidBitrateChangeIsRefusedAndKeepsTheOldRate() throws {
        let encoder = try X265Encoder(Self.config(bitrateKbps: 400))
        #expect(throws: EncoderError.self) { try encoder.setBitrate(kbps: 0) }
        #expect(encoder.bitrateKbps == 400)
        // The old encoder keeps running, without a forced keyframe.
        let units = try Self.encode(encoder, frames: 3)
        #expect(units.map(\.isKeyframe) == [true, false, false])
    }

    @Test func wrongFrameSizeAndEncodingAfterFlushThrow() throws {
        let encoder = try X265Encoder(Self.config())
        let small = SyntheticSource(width: 160, height: 120).frame(at: 0)
        #expect(throws: EncoderError.frameSizeMismatch(expected: "320x240", actual: "160x120")) {
            try encoder.encode(small)
        }
        _ = encoder.flush()
        let frame = SyntheticSource(width: Self.width, height: Self.height).frame(at: 0)
        #expect(throws: EncoderError.alreadyFlushed) { try encoder.encode(frame) }
    }
}

struct SyntheticSourceTests {
    @Test func framesAreDeterministicAndDiffer() {
        let source = SyntheticSource(width: 320, height: 240)
        let a = source.frame(at: 5)
        #expect(a == SyntheticSource(width: 320, height: 240).frame(at: 5))
        #expect(a.bytes.count == 320 * 240 * 3 / 2)
        var reused = source.frame(at: 99)
        source.render(frameIndex: 5, into: &reused)
        #expect(reused == a)
        for index in 0..<40 {
            #expect(source.frame(at: index).luma != source.frame(at: index + 1).luma, "frame \(index)")
        }
    }

    /// Drawn over the picture before it, only what changed is drawn, and the picture is the one
    /// drawn from scratch: frame after frame (the box moving off its old place, counter bits
    /// flipping, the ramp scrolling), after jumps, and at sizes where the bands or the box are tiny.
    @Test(arguments: [(320, 240), (1280, 720), (2, 2), (66, 2), (34, 18)])
    func drawingOnlyWhatChangedGivesTheSamePicture(width: Int, height: Int) {
        let source = SyntheticSource(width: width, height: height)
        var frame = source.frame(at: 0)
        var shown = 0
        for index in Array(1..<70) + [255, 256, 1023, 65_535, 65_536, 3, 3, 0] {
            source.render(frameIndex: index, into: &frame, replacing: shown)
            shown = index
            #expect(frame == source.frame(at: index), "\(width)x\(height) frame \(index)")
        }
    }

    /// The noise band (right half of the rows between the bars and the counter strip) holds the
    /// hash of each pixel's index and the frame's seed, outside the box: pinned here by its formula.
    @Test func noiseIsTheHashOfThePixelAndTheFrame() {
        let (width, height) = (320, 240)
        let source = SyntheticSource(width: width, height: height)
        for index in [0, 1, 77] {
            let frame = source.frame(at: index)
            let seed = UInt32(truncatingIfNeeded: index) &* 0x9E37_79B1
            let (top, bottom) = ((height * 2 / 3) & ~1, (height * 5 / 6) & ~1)
            var checked = 0
            for row in top..<bottom {
                for x in (width / 2)..<width {
                    var hash = UInt32(row * width + x) &* 0x85EB_CA6B ^ seed
                    hash ^= hash >> 13
                    hash = hash &* 0xC2B2_AE35
                    if frame.bytes[row * width + x] == UInt8(truncatingIfNeeded: hash >> 24) { checked += 1 }
                }
            }
            // Every pixel but the box's (at most 40 x 30 of the 160 x 40 band) matches; a wrong
            // hash would match about one in 256.
            #expect(checked >= 160 * 40 - 40 * 30, "frame \(index): \(checked) pixels match")
        }
    }

    @Test func tinyAndOddlyProportionedSizesRender() {
        for (width, height) in [(2, 2), (4, 2), (2, 64), (66, 2), (1922, 1082)] {
            let frame = SyntheticSource(width: width, height: height).frame(at: 1234)
            #expect(frame.bytes.count == YUV420Frame.byteCount(width: width, height: height))
        }
    }

    @Test func planeRangesTileTheBuffer() {
        let frame = YUV420Frame(blackWithWidth: 6, height: 4)
        #expect(frame.lumaRange == 0..<24)
        #expect(frame.cbRange == 24..<30)
        #expect(frame.crRange == 30..<36)
        #expect(frame.luma.allSatisfy { $0 == 16 })
        #expect(frame.cb.allSatisfy { $0 == 128 } && frame.cr.allSatisfy { $0 == 128 })
    }

    @Test func rtpTimestampsFollowTheFrameRate() {
        #expect(X265Encoder.rtpTimestamp(frameIndex: 3, fpsNumerator: 30000, fpsDenominator: 1001) == 9009)
        #expect(X265Encoder.rtpTimestamp(frameIndex: 60, fpsNumerator: 60, fpsDenominator: 1) == 90_000)
    }
}
