import Foundation
import MediaFormats
import MediaSources

// bench encoder-rate: how the live x265 source follows a schedule of target bitrates
// (X265Encoder.setBitrate, the path of LiveSource.requestBitrate), in media time: frames
// are encoded as fast as the machine goes and every figure counts frames, not seconds.

/// Options of `bench encoder-rate`.
struct EncoderRateOptions {
    var width = 1280
    var height = 720
    var frameRate = 30
    /// Target bitrates in kbit/s, one segment each.
    var schedule = [4000, 1000, 2500, 600, 3000]
    /// Segment length in seconds of media time.
    var segmentSeconds = 4
    /// Frames from one keyframe to the next (nil: two seconds' worth, the encoder's default).
    var keyframeInterval: Int?
    /// Markdown report (nil: stdout only).
    var output: String?
    /// A y4m file (`-`: stdin) to encode instead of the synthetic pattern; its size wins over
    /// `--size`, and it must hold enough frames for the schedule.
    var y4m: String?

    static let usage = """
        usage: bench encoder-rate [--size WxH] [--fps N] [--schedule K1,K2,...] [--segment S] [--keyint N] [--y4m FILE|-] [--out FILE]
          encodes the synthetic pattern (or a y4m stream, ultrafast + zerolatency) through the schedule
          of target bitrates (kbit/s, one every S seconds of media time; default 1280x720, 30 fps,
          4000,1000,2500,600,3000, 4 s; a keyframe every N frames, default 2 s) and reports how the
          output follows it
        """

    static func parse(_ arguments: [String]) throws(BenchError) -> EncoderRateOptions {
        var options = EncoderRateOptions()
        var rest = BenchArguments(arguments)
        func value(_ flag: String) throws(BenchError) -> String { try rest.value(flag) }
        func number(_ flag: String, _ text: String, in range: ClosedRange<Int>) throws(BenchError) -> Int {
            try BenchArguments.number(flag, text, in: range)
        }
        while let flag = rest.popFirst() {
            switch flag {
            case "--size":
                let text = try value(flag)
                let parts = text.split(separator: "x")
                guard parts.count == 2 else { throw .usage("--size \(text): expected WxH, e.g. 1280x720") }
                options.width = try number(flag, String(parts[0]), in: 16...EncoderConfig.maxDimension)
                options.height = try number(flag, String(parts[1]), in: 16...EncoderConfig.maxDimension)
            case "--fps": options.frameRate = try number(flag, try value(flag), in: 1...240)
            case "--segment": options.segmentSeconds = try number(flag, try value(flag), in: 2...600)
            case "--schedule":
                let text = try value(flag)
                var schedule: [Int] = []
                for part in text.split(separator: ",") {
                    schedule.append(try number(flag, String(part), in: EncoderConfig.bitrateRangeKbps))
                }
                guard !schedule.isEmpty else { throw .usage("--schedule needs at least one bitrate") }
                options.schedule = schedule
            case "--out": options.output = try value(flag)
            case "--y4m": options.y4m = try value(flag)
            case "--keyint":
                options.keyframeInterval = try number(flag, try value(flag), in: 1...EncoderConfig.maxKeyframeInterval)
            case "--help", "-h": throw .usage("help")
            default: throw .usage("unknown option \(flag) for encoder-rate")
            }
        }
        return options
    }
}

/// What one segment of the schedule gave.
struct EncoderRateSegment {
    var targetKbps: Int
    /// Frames after the change until the first 0.5 s window within ±15 % of the target
    /// (nil: never within the segment).
    var framesToSettle: Int?
    /// Output rate of each whole second after settling, in kbit/s.
    var settledSeconds: [Double]
    var keyframes: Int
}

/// How far a rate may stray from its target and still count as on target.
let encoderRateTolerance = 0.15

/// Cuts a run's frame sizes (bytes) into segments and measures each.
func measureEncoderRate(frameBytes: [Int], keyframes: [Bool], schedule: [Int],
                        framesPerSegment: Int, frameRate: Int) -> [EncoderRateSegment] {
    let window = max(frameRate / 2, 1)
    func kbps(_ range: Range<Int>) -> Double {
        Double(frameBytes[range].reduce(0, +) * 8) * Double(frameRate) / Double(range.count) / 1000
    }
    func onTarget(_ rate: Double, _ target: Int) -> Bool {
        abs(rate - Double(target)) <= encoderRateTolerance * Double(target)
    }
    return schedule.enumerated().map { index, target in
        let start = index * framesPerSegment
        let end = min(start + framesPerSegment, frameBytes.count)
        let settle = (start..<max(start, end - window + 1)).first { onTarget(kbps($0..<($0 + window)), target) }
        var seconds: [Double] = []
        if let settle {
            var second = settle
            while second + frameRate <= end {
                seconds.append(kbps(second..<(second + frameRate)))
                second += frameRate
            }
        }
        return EncoderRateSegment(targetKbps: target, framesToSettle: settle.map { $0 - start },
                                  settledSeconds: seconds,
                                  keyframes: keyframes[start..<end].filter { $0 }.count)
    }
}

/// Runs `bench encoder-rate` and prints (and writes) the report.
func runEncoderRate(_ arguments: [String]) throws {
    var options = try EncoderRateOptions.parse(arguments)
    let frames = try EncoderRateFrames(options)
    (options.width, options.height) = (frames.width, frames.height)
    let config = EncoderConfig(width: options.width, height: options.height, fpsNumerator: options.frameRate,
                               bitrateKbps: options.schedule[0],
                               peakBitrateKbps: min(4 * options.schedule.max()!, EncoderConfig.maxBitrateKbps),
                               keyframeInterval: options.keyframeInterval)
    let encoder = try X265Encoder(config)
    let framesPerSegment = options.segmentSeconds * options.frameRate
    var sizes: [Int] = []
    var keyframes: [Bool] = []
    let started = ContinuousClock.now
    for (segment, target) in options.schedule.enumerated() {
        try encoder.setBitrate(kbps: target)
        for index in (segment * framesPerSegment)..<((segment + 1) * framesPerSegment) {
            if let unit = try encoder.encode(try frames.frame(index)) {
                sizes.append(unit.byteCount)
                keyframes.append(unit.isKeyframe)
            }
        }
    }
    for unit in encoder.flush() {
        sizes.append(unit.byteCount)
        keyframes.append(unit.isKeyframe)
    }
    let elapsed = ContinuousClock.now - started
    let segments = measureEncoderRate(frameBytes: sizes, keyframes: keyframes, schedule: options.schedule,
                                      framesPerSegment: framesPerSegment, frameRate: options.frameRate)
    let command = (["bench", "encoder-rate"] + arguments).joined(separator: " ")
    let report = encoderRateReport(segments, options: options, config: config, encoder: encoder,
                                   frames: sizes.count, keyframes: keyframes.filter { $0 }.count,
                                   elapsed: elapsed, command: command)
    print(report, terminator: "")
    if let output = options.output {
        try Data(report.utf8).write(to: URL(fileURLWithPath: output))
    }
}

/// The frames to encode: the synthetic pattern, or a y4m stream read as it goes.
final class EncoderRateFrames {
    let width: Int
    let height: Int
    private let synthetic: SyntheticSource?
    private var frame: YUV420Frame
    private let handle: FileHandle?
    private var reader = Y4MReader()
    private var pending: [Y4MFrame] = []

    init(_ options: EncoderRateOptions) throws {
        guard let path = options.y4m else {
            (width, height) = (options.width, options.height)
            synthetic = SyntheticSource(width: width, height: height)
            frame = YUV420Frame(blackWithWidth: width, height: height)
            handle = nil
            return
        }
        guard let handle = path == "-" ? FileHandle.standardInput : FileHandle(forReadingAtPath: path) else {
            throw BenchError.usage("--y4m \(path): cannot open it")
        }
        self.handle = handle
        synthetic = nil
        pending = []
        while pending.isEmpty {
            let chunk = handle.readData(ofLength: 1 << 20)
            guard !chunk.isEmpty else { throw BenchError.runtime("--y4m \(path): no frame in it") }
            pending = try reader.append([UInt8](chunk))
        }
        (width, height) = (pending[0].width, pending[0].height)
        frame = YUV420Frame(width: width, height: height, bytes: pending[0].data)
    }

    /// Frame `index` (frames are asked for in order).
    func frame(_ index: Int) throws -> YUV420Frame {
        if let synthetic {
            synthetic.render(frameIndex: index, into: &frame)
            return frame
        }
        while pending.isEmpty, let handle {
            let chunk = handle.readData(ofLength: 1 << 20)
            guard !chunk.isEmpty else {
                throw BenchError.runtime("the y4m stream ended at frame \(index): the schedule needs more")
            }
            pending = try reader.append([UInt8](chunk))
        }
        let next = pending.removeFirst()
        return YUV420Frame(width: next.width, height: next.height, bytes: next.data)
    }
}

/// The Markdown table and the summary lines.
func encoderRateReport(_ segments: [EncoderRateSegment], options: EncoderRateOptions, config: EncoderConfig,
                       encoder: X265Encoder, frames: Int, keyframes: Int, elapsed: Duration,
                       command: String) -> String {
    func format(_ value: Double) -> String { String(format: "%.0f", value) }
    var lines = [
        "| target kbit/s | frames to settle | settled seconds within ±15 % | per-second kbit/s once settled | keyframes |",
        "|---:|---:|---:|---|---:|",
    ]
    var withinTotal = 0
    var secondsTotal = 0
    for segment in segments {
        let within = segment.settledSeconds.filter {
            abs($0 - Double(segment.targetKbps)) <= encoderRateTolerance * Double(segment.targetKbps)
        }.count
        withinTotal += within
        secondsTotal += segment.settledSeconds.count
        lines.append("| \(segment.targetKbps) | \(segment.framesToSettle.map(String.init) ?? "never") | "
            + "\(within)/\(segment.settledSeconds.count) | \(segment.settledSeconds.map(format).joined(separator: ", ")) | "
            + "\(segment.keyframes) |")
    }
    let periodic = (frames + config.keyframeInterval - 1) / config.keyframeInterval
    let changes = encoder.rateChanges
    lines += [
        "",
        "\(options.y4m.map { "y4m \($0 == "-" ? "stdin" : $0)" } ?? "synthetic pattern"), "
            + "\(config.width)x\(config.height), \(options.frameRate) fps, \(config.preset) + \(config.tune), keyframe every "
            + "\(config.keyframeInterval) frames, VBV peak \(config.effectivePeakBitrateKbps) kbit/s; \(frames) frames "
            + "encoded in \(String(format: "%.1f", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)) s.",
        "Settled seconds within ±15 % of the target: \(withinTotal)/\(secondsTotal). "
            + "Keyframes: \(keyframes) (periodic: \(periodic)). "
            + "Rate changes: \(changes.requested) requested, \(changes.applied) applied live, \(changes.fallbacks) fallbacks (reopen + IDR).",
        "A segment settles at the first frame after the change from which half a second of output is within ±15 % of "
            + "the target; its seconds are then counted from that frame on, whole seconds only.",
        "",
        "Command: `\(command)`",
        "",
    ]
    return lines.joined(separator: "\n")
}
