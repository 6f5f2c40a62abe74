import Dispatch
import Glibc
import MediaFormats
import Synchronization
import UringIO

/// Runs a ``MediaSource`` on a thread of its own: encodes or reads access units and hands
/// them to an ``AccessUnitSink`` (a `MediaSender`, an `RTSPMediaGate`) in real time (frame i
/// at start + i / frame rate), until its end, the frame limit or `shouldStop`; then finishes
/// the sink. What `streamer send` runs.
///
/// A `.hevc` file read for a sink that holds access units until their time
/// (``AccessUnitSink/holdsUntilDue``, a `MediaSender`) is read ahead: frames due within the
/// next ``readAheadHorizon(frameRate:)`` are handed over at once with their due times, and the
/// source thread sleeps once per horizon, not once per frame; the sender's own thread sends
/// each frame at its time. Encoded sources (x265) hand each frame over as it is made.
///
/// A source that falls behind by more than the stall threshold (blocked, or slower than real
/// time) does not catch up in a burst afterwards: its schedule starts again from the late
/// frame. Its ``stalls`` watch counts such gaps.
///
/// With ``HandOver/fast(maxAhead:finished:wait:)`` a source does not wait for its frames'
/// times: it hands each frame over as soon as it is read or encoded, while the sink has fewer
/// than `maxAhead` frames it has not finished with (timestamps still count at the frame rate).
///
/// An x265 source (synthetic or y4m) follows ``requestBitrate(kbps:)``: the engine's thread
/// asks, the source thread applies the latest request before its next frame, and
/// ``bitrateStats`` counts the changes. A `.hevc` file is sent as it is.
///
/// ```swift
/// let source = LiveSource { event in print(event) }  // stalls, told once each way
/// source.start(.hevcFile(path: "clip.hevc"), frameRate: 30, sink: sender)  // sender: a MediaSender
/// source.waitUntilReady()
/// if let failure = source.failure { throw failure }
/// let sdp = SDPSessionDescription.hevc(parameterSets: source.parameterSets, connectionAddress: "192.0.2.10", port: 5004)
/// try sender.run()
/// ```
public final class LiveSource: Sendable {
    private struct Outcome {
        var failure: MediaSourceError?
        var parameterSets: [[UInt8]] = []
    }

    private let outcome = Mutex(Outcome())
    /// The latest bitrate request not yet taken by the source thread, and the counters.
    private let bitrate = Mutex(BitrateState())

    private struct BitrateState {
        /// False for a `.hevc` file source, which has no encoder to ask.
        var followsRequests = true
        var pending: Int?
        var stats = SourceBitrateStats()
    }
    private let ready = DispatchSemaphore(value: 0)
    /// Notices (from the source's own thread and a watch thread) when this source stops
    /// delivering access units.
    public let stalls: SourceStallWatch

    /// Makes a source runner; `onStall` hears when the source stalls, resumes, or ends while
    /// stalled (on the source's thread or the stall watch's).
    public init(onStall: @escaping @Sendable (SourceStallEvent) -> Void = { _ in }) {
        stalls = SourceStallWatch(onEvent: onStall)
    }

    /// Why the source stopped early, once it has (nil while it runs and after a clean end).
    public var failure: MediaSourceError? { outcome.withLock { $0.failure } }

    /// The stream's VPS, SPS and PPS NAL units (for an SDP), once ``waitUntilReady()`` has
    /// returned; empty when the source failed before it knew them.
    public var parameterSets: [[UInt8]] { outcome.withLock { $0.parameterSets } }

    /// Blocks until the source knows its parameter sets (x265 is open, or the first access
    /// unit of the file was read) or has failed (``failure``); at once after that.
    public func waitUntilReady() {
        ready.wait()
        ready.signal()  // for the next caller
    }

    /// Starts the source thread. `frameRate` paces the frames (a y4m source without a
    /// `frameRate` of its own takes the header's); `bitrateKbps` is x265's target (default
    /// 4000, as `streamer send`'s; a `.hevc` file is sent as it is); `frameLimit` (nil: no
    /// limit) counts the frames handed over. The thread ends the sink (`finish`) when it stops.
    ///
    /// `peakBitrateKbps` is the highest rate ``requestBitrate(kbps:)`` reaches without a keyframe
    /// (x265's VBV, fixed at open; default four times the opening rate); give it the congestion
    /// controller's maximum. A request above it reopens the encoder (one IDR, a fallback).
    ///
    /// `handOver` ``HandOver/fast(maxAhead:finished:wait:)`` hands frames over as fast as the sink
    /// takes them instead of at their times.
    public func start(_ source: MediaSource, frameRate: Int, bitrateKbps: Int = 4_000, peakBitrateKbps: Int? = nil,
                      frameLimit: Int? = nil, handOver: HandOver = .realTime,
                      sink: any AccessUnitSink, shouldStop: @escaping @Sendable () -> Bool = { false }) {
        stalls.start(frameRate: frameRate)
        if case .hevcFile = source { bitrate.withLock { $0 = BitrateState(followsRequests: false) } }
        startDetachedThread { [self] in
            defer { stalls.sourceEnded(); sink.finish() }
            do throws(MediaSourceError) {
                var run = SourceRun(source: self, frameRate: frameRate, frameLimit: frameLimit, sink: sink,
                                    shouldStop: shouldStop, bitrateKbps: bitrateKbps,
                                    peakBitrateKbps: peakBitrateKbps, handOver: handOver)
                switch source {
                case let .synthetic(width, height):
                    try run.encodeSynthetic(width: width, height: height)
                case let .hevcFile(path):
                    try run.readAnnexB(path: path)
                case let .y4m(file, frameRateOverride):
                    try run.encodeY4M(file, frameRate: frameRateOverride)
                }
            } catch {
                outcome.withLock { $0.failure = error }
                ready.signal()
            }
        }
    }

    /// The parameter sets are known: ``waitUntilReady()`` returns.
    fileprivate func publish(parameterSets: [[UInt8]]) {
        outcome.withLock { $0.parameterSets = parameterSets }
        ready.signal()
    }

    /// The source ended before it knew its parameter sets: ``waitUntilReady()`` returns anyway.
    fileprivate func releaseWaiters() { ready.signal() }

    /// Asks the encoder for a new target bitrate in kbit/s, clamped to
    /// ``EncoderConfig/bitrateRangeKbps``. Thread-safe and non-blocking (a congestion
    /// controller on the engine's thread calls it): it only records the request; the source
    /// thread applies the latest one before it encodes its next frame, without a keyframe
    /// (``X265Encoder/setBitrate(kbps:)``), so of several requests between two frames the last
    /// wins. A request before the encoder opens sets the rate it opens with. A `.hevc` file
    /// source cannot change its rate: there the call does nothing.
    public func requestBitrate(kbps: Int) {
        let clamped = EncoderConfig.bitrateRangeKbps.clamped(kbps)
        bitrate.withLock { state in
            guard state.followsRequests, clamped != (state.pending ?? state.stats.targetKbps) else { return }
            state.pending = clamped
            state.stats.requested += 1
        }
    }

    /// The bitrate the source encodes at and how its changes went (all zero for a `.hevc`
    /// file).
    public var bitrateStats: SourceBitrateStats { bitrate.withLock { $0.stats } }

    /// How far ahead of their time a file source hands frames to a sink that holds them until
    /// due: 400 ms, or 32 frame intervals when that is less (a sender queues at most
    /// `maxQueuedFrames`, 120 by default). The source thread sleeps about half of it at a time:
    /// at 30 fps once per 6 frames (every wake-up of an idle thread costs 20 – 47 µs of CPU on
    /// this project's VMs, results/profile.md section 43), and its hand-overs stay well within
    /// the stall threshold (``SourceStallWatch/threshold(frameRate:)``, at least 500 ms).
    public static func readAheadHorizon(frameRate: Int) -> Duration {
        min(.milliseconds(400), .nanoseconds(32 * 1_000_000_000 / Int64(max(frameRate, 1))))
    }

    /// The source thread takes the latest request (nil: none since the last call).
    fileprivate func takeBitrateRequest() -> Int? {
        bitrate.withLock { state in
            defer { state.pending = nil }
            return state.pending
        }
    }

    /// The source thread reports what its encoder now does.
    fileprivate func publish(encoder: X265Encoder) {
        bitrate.withLock { state in
            state.stats.targetKbps = encoder.bitrateKbps
            state.stats.applied = encoder.rateChanges.applied
            state.stats.fallbacks = encoder.rateChanges.fallbacks
        }
    }
}

/// When a ``LiveSource`` hands its frames to the sink.
public enum HandOver: Sendable {
    /// Frame i at start + i / frame rate (the default).
    case realTime
    /// Each frame as soon as it is read or encoded, while fewer than `maxAhead` frames handed
    /// over are not finished yet; `finished` counts the frames the sink is done with (sent or
    /// dropped). Once `maxAhead` are unfinished the source waits until half of them are (one
    /// wait per `maxAhead / 2` frames, not one per frame): with `wait`, which returns once
    /// `finished` reaches its first argument or its timeout passed (the sink wakes it), else
    /// polling `finished` every 200 µs. When that count stops moving for a second the source
    /// hands over anyway (the sink drops what it has no room for).
    case fast(maxAhead: Int, finished: @Sendable () -> Int,
              wait: (@Sendable (_ finished: Int, _ timeout: Duration) -> Void)? = nil)
}

/// A live source's target bitrate and the changes it was asked for
/// (``LiveSource/requestBitrate(kbps:)``).
public struct SourceBitrateStats: Sendable, Equatable {
    /// The encoder's target in kbit/s now (0 before it opens, and for a `.hevc` file).
    public var targetKbps = 0
    /// Requests that differed from the target or the request before them. A request replaced
    /// by a later one before the next frame counts here and in neither of the two below.
    public var requested = 0
    /// Changes the encoder made live, without a keyframe.
    public var applied = 0
    /// Changes made by reopening the encoder (one IDR each), when the live path failed.
    public var fallbacks = 0

    /// Makes the counters from their values.
    public init(targetKbps: Int = 0, requested: Int = 0, applied: Int = 0, fallbacks: Int = 0) {
        self.targetKbps = targetKbps
        self.requested = requested
        self.applied = applied
        self.fallbacks = fallbacks
    }
}

/// One run of a source on its thread: the frame schedule and the three kinds of source.
private struct SourceRun {
    let source: LiveSource
    let frameLimit: Int?
    let sink: any AccessUnitSink
    let shouldStop: @Sendable () -> Bool
    /// x265's opening rate (unless a request came first) and its peak (nil: the default).
    let bitrateKbps: Int
    let peakBitrateKbps: Int?
    let handOver: HandOver
    /// When frame 0 was (or would have been) due; moves on after a stall.
    var start = ContinuousClock.now
    /// The same for a file read ahead, in `CLOCK_MONOTONIC` nanoseconds (the sink's clock).
    var startNanoseconds = monotonicNanoseconds()
    /// Frames handed over so far.
    var index = 0
    var frameRate: Int

    init(source: LiveSource, frameRate: Int, frameLimit: Int?, sink: any AccessUnitSink,
         shouldStop: @escaping @Sendable () -> Bool, bitrateKbps: Int, peakBitrateKbps: Int?, handOver: HandOver) {
        self.source = source
        self.handOver = handOver
        self.bitrateKbps = bitrateKbps
        self.peakBitrateKbps = peakBitrateKbps
        self.frameRate = frameRate
        self.frameLimit = frameLimit
        self.sink = sink
        self.shouldStop = shouldStop
    }

    var done: Bool { shouldStop() || (frameLimit.map { index >= $0 } ?? false) }

    /// Hands frame `index` over with its due time (the sink holds it until then), sleeping
    /// first only when that time is beyond the read-ahead horizon: then until half the horizon
    /// before it, so each sleep covers about half a horizon of frames. A frame far behind its
    /// time (a stall, a slow disk) moves the schedule on from it, as ``waitForSlot()`` does.
    mutating func handAhead(_ unit: AccessUnit) {
        source.stalls.frameDelivered(at: .now)
        let interval = 1_000_000_000 / Int64(frameRate)
        let now = monotonicNanoseconds()
        let due = startNanoseconds + Int64(index) * interval
        if now - due > SourceStallWatch.threshold(frameRate: frameRate).nanoseconds { startNanoseconds += now - due }
        let dueNow = startNanoseconds + Int64(index) * interval
        let horizon = LiveSource.readAheadHorizon(frameRate: frameRate).nanoseconds
        if dueNow - now > horizon {
            usleep(useconds_t((dueNow - now - horizon / 2) / 1000))
        }
        sink.send(unit, at: dueNow)
        index += 1
    }

    /// With ``HandOver/fast(maxAhead:finished:wait:)``: when `maxAhead` of the `index` frames
    /// handed over are unfinished, waits until at most half of them are, then hands `unit` over,
    /// due now.
    func handFast(_ unit: AccessUnit, maxAhead: Int, finished: () -> Int, wait: ((Int, Duration) -> Void)?) {
        var done = finished()
        if index - done >= maxAhead {
            let wanted = index - maxAhead / 2
            var progressed = ContinuousClock.now
            while done < wanted && !shouldStop() && ContinuousClock.now - progressed < .seconds(1) {
                if let wait { wait(wanted, .milliseconds(20)) } else { usleep(200) }
                let now = finished()
                if now != done { (done, progressed) = (now, .now) }
            }
        }
        sink.send(unit, at: monotonicNanoseconds())
    }

    /// Hands `unit` over now: at once with ``HandOver/fast(maxAhead:finished:wait:)`` (when the
    /// sink has room), else as it is.
    func handNow(_ unit: AccessUnit) {
        guard case let .fast(maxAhead, finished, wait) = handOver else {
            sink.send(unit)
            return
        }
        handFast(unit, maxAhead: maxAhead, finished: finished, wait: wait)
    }

    /// True with ``HandOver/fast(maxAhead:finished:wait:)``.
    var isFast: Bool {
        if case .fast = handOver { return true }
        return false
    }

    /// Sleeps until frame `index` is due (start + index / rate). Frame `index - 1` was just
    /// delivered: a stall or a slow source that left it far behind its time moves the
    /// schedule on instead of sending the frames it missed back to back. With
    /// ``HandOver/fast(maxAhead:finished:wait:)`` there is no wait.
    mutating func waitForSlot() {
        let now = ContinuousClock.now
        source.stalls.frameDelivered(at: now)
        if isFast { return }
        let due = start + .nanoseconds(Int64(index) * 1_000_000_000 / Int64(frameRate))
        let late = now - due + .nanoseconds(1_000_000_000 / Int64(frameRate))
        if late > SourceStallWatch.threshold(frameRate: frameRate) { start += late }
        if due > now { usleep(useconds_t((due - now).nanoseconds / 1000)) }
    }

    /// Hands over an access unit x265 made from `frame` (none while x265 holds frames back),
    /// at the latest bitrate requested.
    func encode(_ frame: YUV420Frame, with encoder: X265Encoder) throws(MediaSourceError) {
        if let kbps = source.takeBitrateRequest() {
            // In range already, so only a failed reopen (above the peak) throws: the old rate stays.
            try? encoder.setBitrate(kbps: kbps)
            source.publish(encoder: encoder)
        }
        let unit: AccessUnit?
        do { unit = try encoder.encode(frame, forceKeyframe: sink.takeKeyframeRequest()) } catch { throw .encoder(error) }
        if let unit { handNow(unit) }
    }

    /// The synthetic test pattern, encoded.
    mutating func encodeSynthetic(width: Int, height: Int) throws(MediaSourceError) {
        let encoder = try openEncoder(width: width, height: height)
        source.publish(encoder: encoder)
        source.publish(parameterSets: encoder.headers)
        let pattern = SyntheticSource(width: width, height: height)
        var frame = YUV420Frame(blackWithWidth: width, height: height)
        // x265 copies the planes in its encode call, so the frame still shows the last picture:
        // only what differs is drawn.
        var shown: Int?
        while !done {
            pattern.render(frameIndex: index, into: &frame, replacing: shown)
            shown = index
            try encode(frame, with: encoder)
            index += 1
            waitForSlot()
        }
    }

    /// An Annex B file, access unit by access unit, with timestamps from the frame index.
    mutating func readAnnexB(path: String) throws(MediaSourceError) {
        guard let file = InputFile(readingAtPath: path) else { throw .cannotOpen(path: path) }
        var splitter = AnnexBAccessUnitSplitter()
        var headersSent = false
        let readsAhead = sink.holdsUntilDue && !isFast
        func deliver(_ units: [AccessUnit]) {
            for var unit in units where !done {
                if !headersSent {
                    source.publish(parameterSets: unit.parameterSets)
                    headersSent = true
                }
                unit.timestamp = UInt32(truncatingIfNeeded: index * 90_000 / frameRate)
                if readsAhead {
                    handAhead(unit)
                    continue
                }
                handNow(unit)
                index += 1
                waitForSlot()
            }
        }
        // read(2) into a new chunk each time, split in place: the access units' NAL units are
        // slices of it (not copies), and it is freed with the last of them. The sender queues
        // at most a bounded number of frames and the source reads ahead a bounded time, so the
        // chunks alive cover that span of the file and two more (the one being split, and one
        // an access unit begun in it may still slice): results/profile.md, section 27.
        // FileHandle.readData made a new Data per megabyte, and [UInt8](chunk) copied it again;
        // mapping the file saved read(2)'s copy but turns a file truncated while it is sent
        // into SIGBUS (section 22).
        while !done {
            var count = 0
            let chunk = [UInt8](unsafeUninitializedCapacity: 1 << 20) { storage, initialized in
                count = file.read(into: UnsafeMutableRawBufferPointer(storage))
                initialized = max(count, 0)
            }
            if count <= 0 { break }  // the end, or a read error (EINTR is retried by `read(into:)`)
            // A short read (a FIFO gives at most its pipe's size) is copied into an array of
            // its size: a megabyte held for a few kilobytes would multiply what the slices keep.
            let kept = count >= chunk.capacity / 2 ? chunk : chunk.withUnsafeBufferPointer { Array($0) }
            deliver(splitter.append(sharing: kept[...]))
        }
        deliver(splitter.finish())
        // Thrown before the waiters are released: the thread's `catch` sets `failure` first and
        // then releases them, so `waitUntilReady()` never returns before `failure` says why.
        if index == 0 { throw .noAccessUnits(path: path) }
        if !headersSent { source.releaseWaiters() }
    }

    /// y4m frames, encoded; x265 opens at the first frame, at the header's size and rate
    /// (or `frameRateOverride`). Each frame's pixels are read straight into the frame x265
    /// reads its planes from, whose storage then holds the next frame (``Y4MFileReader``).
    mutating func encodeY4M(_ file: InputFile, frameRate frameRateOverride: Int?,
) throws(MediaSourceError) {
        var frames = Y4MFileReader(file)
        var encoder: X265Encoder?
        while !done {
            let next: Y4MFrame?
            do { next = try frames.next() } catch { throw .y4m(error) }
            guard let frame = next else { break }
            if encoder == nil {
                let header = frames.header!
                if let frameRateOverride {
                    frameRate = frameRateOverride
                } else if header.frameRateDenominator > 0 {
                    frameRate = max(1, header.frameRateNumerator / header.frameRateDenominator)
                }
                source.stalls.setFrameRate(frameRate)
                encoder = try openEncoder(width: frame.width, height: frame.height)
                source.publish(encoder: encoder!)
                source.publish(parameterSets: encoder!.headers)
            }
            // x265 copies the planes in the call: the storage is free for the next frame after it.
            try encode(YUV420Frame(width: frame.width, height: frame.height, bytes: frame.data), with: encoder!)
            frames.reuseStorage(of: consume frame)
            index += 1
            waitForSlot()
        }
        // The thread's `catch` sets `failure`, then releases the waiters (see `readAnnexB`).
        guard let encoder else { throw .y4mEndedBeforeFirstFrame }
        for unit in encoder.flush() { sink.send(unit) }
    }

    /// Opens x265 at the latest bitrate requested (or the start's), with its peak.
    private func openEncoder(width: Int, height: Int) throws(MediaSourceError) -> X265Encoder {
        let kbps = source.takeBitrateRequest() ?? bitrateKbps
        let peak = peakBitrateKbps.map { max($0, kbps) }
        let config = EncoderConfig(width: width, height: height, fpsNumerator: frameRate, bitrateKbps: kbps,
                                   peakBitrateKbps: peak.map { min($0, EncoderConfig.maxBitrateKbps) })
        do { return try X265Encoder(config) } catch { throw .encoder(error) }
    }
}
