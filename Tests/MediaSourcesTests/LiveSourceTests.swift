import Foundation
import MediaFormats
import UringIO
import Synchronization
import Testing
@testable import MediaSources

/// A sink that keeps what it is handed.
final class CollectingSink: AccessUnitSink {
    private let state = Mutex<(units: [AccessUnit], finished: Bool)>(([], false))
    var units: [AccessUnit] { state.withLock { $0.units } }
    var finished: Bool { state.withLock { $0.finished } }
    func send(_ accessUnit: AccessUnit) -> Bool {
        state.withLock { $0.units.append(accessUnit) }
        return true
    }
    func finish() { state.withLock { $0.finished = true } }
    func takeKeyframeRequest() -> Bool { false }
}

/// A sink that holds access units until their due time: keeps each with its due time and
/// when it was handed over (monotonic nanoseconds).
final class DueSink: AccessUnitSink {
    private let state = Mutex<(handed: [(unit: AccessUnit, due: Int64, at: Int64)], finished: Bool)>(([], false))
    var handed: [(unit: AccessUnit, due: Int64, at: Int64)] { state.withLock { $0.handed } }
    var finished: Bool { state.withLock { $0.finished } }
    var holdsUntilDue: Bool { true }
    func send(_ accessUnit: AccessUnit) -> Bool { send(accessUnit, at: monotonicNanoseconds()) }
    func send(_ accessUnit: AccessUnit, at dueTime: Int64) -> Bool {
        let now = monotonicNanoseconds()
        state.withLock { $0.handed.append((accessUnit, dueTime, now)) }
        return true
    }
    func finish() { state.withLock { $0.finished = true } }
    func takeKeyframeRequest() -> Bool { false }
}

/// Runs `source` to its end (fast: 250 frames a second) and returns what the sink got.
func runToEnd(_ source: MediaSource, frameLimit: Int? = nil) -> (LiveSource, CollectingSink) {
    let live = LiveSource()
    let sink = CollectingSink()
    live.start(source, frameRate: 250, bitrateKbps: 300, frameLimit: frameLimit, sink: sink)
    live.waitUntilReady()
    let deadline = Date().addingTimeInterval(30)
    while !sink.finished && Date() < deadline { usleep(2000) }
    return (live, sink)
}

func temporaryFile(_ contents: [UInt8], suffix: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("source-\(UUID().uuidString)\(suffix)").path
    try Data(contents).write(to: URL(fileURLWithPath: path))
    return path
}

@Suite(.serialized)
struct LiveSourceTests {
    @Test func syntheticSourceEncodesUpToTheLimitAndFinishesTheSink() throws {
        let (live, sink) = runToEnd(.synthetic(width: 320, height: 240), frameLimit: 6)
        #expect(sink.finished)
        #expect(live.failure == nil)
        #expect(sink.units.count == 6)
        live.waitUntilReady()  // returns at once, again
        #expect(live.parameterSets.map { HEVCNALUnitType(nalUnit: $0) } == [.vps, .sps, .pps])
        #expect(sink.units.first?.parameterSets == live.parameterSets)
    }

    @Test func annexBFileIsSentUnitByUnitWithTimestampsFromTheFrameIndex() throws {
        let (_, encoded) = runToEnd(.synthetic(width: 320, height: 240), frameLimit: 5)
        let path = try temporaryFile(encoded.units.flatMap(\.annexB), suffix: ".hevc")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (live, sink) = runToEnd(.hevcFile(path: path))
        #expect(live.failure == nil)
        #expect(sink.units.map(\.nalUnits) == encoded.units.map(\.nalUnits))
        let expected: [UInt32] = (0..<5).map { index in UInt32(index * 90_000 / 250) }
        #expect(sink.units.map(\.timestamp) == expected)
        #expect(live.parameterSets == encoded.units[0].parameterSets)
    }

    /// A y4m file whose frames (1.4 MB) span the source's 1 MB reads: every frame reaches x265
    /// whole (a misplaced byte would break the next FRAME line) and comes out as one access unit.
    @Test func y4mFramesAcrossReadsAreEncodedOneUnitEach() throws {
        let (width, height) = (1280, 720)
        var file = Array("YUV4MPEG2 W\(width) H\(height) F30:1 Ip C420jpeg\n".utf8)
        for index in 0..<3 {
            file += Array("FRAME\n".utf8)
            file += (0..<(width * height * 3 / 2)).map { UInt8(truncatingIfNeeded: $0 / 7 + index * 40) }
        }
        let path = try temporaryFile(file, suffix: ".y4m")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (live, sink) = runToEnd(.y4m(try #require(InputFile(readingAtPath: path)), frameRate: nil))
        #expect(live.failure == nil)
        #expect(sink.units.count == 3)
        #expect(sink.units.first?.isKeyframe == true)
        #expect(live.parameterSets.map { HEVCNALUnitType(nalUnit: $0) } == [.vps, .sps, .pps])
    }

    /// y4m pixels read straight into the frame (one readv(2) per frame, the frame's storage
    /// given back): every frame exactly as in the input, from a file and from a pipe. 320x240
    /// frames (115,200 B) against the reader's 4 KB line buffer, and 16x16 ones (384 B), many of
    /// which come in one read.
    @Test(arguments: [(320, 240), (16, 16)])
    func y4mFramesAreReadIntoTheirStorageUnchanged(width: Int, height: Int) throws {
        let pattern = SyntheticSource(width: width, height: height)
        let pictures = (0..<20).map { pattern.frame(at: $0 * 3).bytes }
        var file = Array("YUV4MPEG2 W\(width) H\(height) F30:1 Ip C420jpeg\n".utf8)
        for (index, picture) in pictures.enumerated() { file += Array((index == 3 ? "FRAME Ip\n" : "FRAME\n").utf8) + picture }
        let path = try temporaryFile(file + Array("FRAME\n".utf8) + [1, 2, 3], suffix: ".y4m")  // a truncated last frame
        defer { try? FileManager.default.removeItem(atPath: path) }
        func readAll(_ file: InputFile) throws -> [[UInt8]] {
            var frames = Y4MFileReader(file)
            var read: [[UInt8]] = []
            while let frame = try frames.next() {
                read.append(Array(frame.data))
                frames.reuseStorage(of: frame)
            }
            #expect(frames.header?.width == width)
            return read
        }
        #expect(try readAll(try #require(InputFile(readingAtPath: path))) == pictures)

        let pipe = Pipe()
        let (writing, bytes) = (pipe.fileHandleForWriting, file)
        let writer = Thread {
            for start in stride(from: 0, to: bytes.count, by: 10_007) {
                writing.write(Data(bytes[start..<min(start + 10_007, bytes.count)]))
            }
            try? writing.close()
        }
        writer.start()
        #expect(try readAll(InputFile(descriptor: pipe.fileHandleForReading.fileDescriptor, closesOnDeinit: false)) == pictures)
    }

    /// A sink that holds access units until their due time (as a `MediaSender` does): the file
    /// is read ahead, every frame handed over with its due time, frame i due 1 / rate after frame
    /// i - 1, none handed over more than the horizon before its time, and frames well ahead of it.
    @Test func annexBFileIsReadAheadForASinkThatHoldsUntilDue() throws {
        let (_, encoded) = runToEnd(.synthetic(width: 320, height: 240), frameLimit: 40)
        let path = try temporaryFile(encoded.units.flatMap(\.annexB), suffix: ".hevc")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let live = LiveSource()
        let sink = DueSink()
        live.start(.hevcFile(path: path), frameRate: 250, sink: sink)
        let deadline = Date().addingTimeInterval(30)
        while !sink.finished && Date() < deadline { usleep(2000) }
        let handed = sink.handed
        #expect(live.failure == nil)
        #expect(handed.map(\.unit.nalUnits) == encoded.units.map(\.nalUnits))
        let dues = handed.map(\.due)
        #expect(zip(dues, dues.dropFirst()).allSatisfy { $1 - $0 == 4_000_000 })
        let horizon = LiveSource.readAheadHorizon(frameRate: 250).nanoseconds
        #expect(horizon == 128_000_000)  // 32 frames at 250 fps (400 ms at 30 fps)
        #expect(LiveSource.readAheadHorizon(frameRate: 30) == .milliseconds(400))
        #expect(handed.allSatisfy { $0.due - $0.at <= horizon })
        #expect(handed.contains { $0.due - $0.at > 50_000_000 })  // read ahead, not frame by frame
    }

    /// `.fast`: a file at 1 frame per second is handed over without waiting for its frames'
    /// times (in real time the 40 frames would take 40 s; the test's deadline is 30 s), each
    /// frame due when it is handed over, not read ahead, with timestamps still at the rate.
    @Test func fastHandOverDoesNotWaitForTheFramesTimes() throws {
        let (_, encoded) = runToEnd(.synthetic(width: 320, height: 240), frameLimit: 40)
        let path = try temporaryFile(encoded.units.flatMap(\.annexB), suffix: ".hevc")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let live = LiveSource()
        let sink = DueSink()
        live.start(.hevcFile(path: path), frameRate: 1, handOver: .fast(maxAhead: 1000) { 0 }, sink: sink)
        let deadline = Date().addingTimeInterval(30)
        while !sink.finished && Date() < deadline { usleep(2000) }
        let handed = sink.handed
        #expect(live.failure == nil)
        #expect(handed.map(\.unit.nalUnits) == encoded.units.map(\.nalUnits))
        #expect(handed.map(\.unit.timestamp) == (0..<40).map { UInt32($0 * 90_000) })
        #expect(handed.allSatisfy { $0.due <= $0.at })
    }

    /// `.fast` hands over no more than `maxAhead` frames the sink has not finished, and goes on
    /// as the sink finishes them.
    @Test func fastHandOverWaitsForTheSinkToFinishFrames() throws {
        let finished = Atomic<Int>(0)
        let live = LiveSource()
        let sink = CollectingSink()
        live.start(.synthetic(width: 320, height: 240), frameRate: 1, frameLimit: 12,
                   handOver: .fast(maxAhead: 4) { finished.load(ordering: .relaxed) }, sink: sink)
        func waitFor(_ count: Int) {
            let deadline = Date().addingTimeInterval(20)
            while sink.units.count < count && Date() < deadline { usleep(1000) }
        }
        waitFor(4)
        #expect(sink.units.count == 4)
        finished.store(3, ordering: .relaxed)
        waitFor(7)
        #expect(sink.units.count == 7)
        finished.store(12, ordering: .relaxed)
        let deadline = Date().addingTimeInterval(20)
        while !sink.finished && Date() < deadline { usleep(2000) }
        #expect(sink.units.count == 12 && live.failure == nil)
    }

    /// x265's CPU is counted apart: its threads carry the encoder's name while it is open,
    /// and encoding adds to ``EncoderCPUTime/seconds``, at most the process's own CPU time.
    @Test func encoderCPUTimeCountsX265AndItsThreads() throws {
        let before = EncoderCPUTime.seconds
        let encoder = try X265Encoder(EncoderConfig(width: 640, height: 360, fpsNumerator: 30, bitrateKbps: 1000))
        let named = EncoderCPUTime.threadNanoseconds { $0.hasPrefix(EncoderCPUTime.threadNamePrefix) }
        #expect(named >= 0)
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").compactMap {
            try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)
        }
        #expect(tasks.contains { $0.hasPrefix(EncoderCPUTime.threadNamePrefix) }, "threads: \(tasks)")
        let pattern = SyntheticSource(width: 640, height: 360)
        var frame = YUV420Frame(blackWithWidth: 640, height: 360)
        for index in 0..<20 {
            pattern.render(frameIndex: index, into: &frame)
            _ = try encoder.encode(frame)
        }
        let after = EncoderCPUTime.seconds
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        let process = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        #expect(after > before)
        #expect(after <= process)
        withExtendedLifetime(encoder) {}
    }

    /// A stream of 3.3 MB, several of the source's 1 MiB reads, with NAL units of 150 – 450 kB
    /// that cross read edges and both start code lengths: read from a regular file and from a
    /// FIFO (whose reads return what the writer has written so far), every access unit comes
    /// out as the splitter cuts the whole stream in one buffer, its NAL units (slices of the
    /// reads, or copies where they cross one's end) the bytes written.
    @Test func aLargeFileAndAFIFOGiveTheWholeStreamsAccessUnits() throws {
        var generator = SystemRandomNumberGenerator()
        let seed = Int.random(in: 0..<1 << 30, using: &generator)
        func nal(_ header: [UInt8], size: Int) -> [UInt8] {
            // Odd bytes (never 00 00) of a multiplicative hash: random generators are slow in debug builds.
            header + (header.count..<size).map { UInt8(truncatingIfNeeded: (($0 + seed) &* 0x9E37_79B1) >> 13) | 1 }
        }
        var stream: [UInt8] = []
        var writtenNALs: [[UInt8]] = []
        func write(_ startCode: [UInt8], _ nal: [UInt8]) {
            stream += startCode + nal
            writtenNALs.append(nal)
        }
        for frame in 0..<12 {
            if frame % 4 == 0 {
                for header: [UInt8] in [[0x40, 0x01, 0x0C], [0x42, 0x01, 0x01], [0x44, 0x01, 0xC0]] {
                    write([0, 0, 0, 1], nal(header, size: 24))
                }
            }
            let type: UInt8 = frame % 4 == 0 ? 19 : 1
            // At least 270,000 bytes each: 12 make more than 3 MiB whatever the draw (the check below).
            write([0, 0, 0, 1], nal([type << 1, 0x01, 0x80], size: Int.random(in: 270_000...300_000, using: &generator)))
            write([0, 0, 1], nal([type << 1, 0x01, 0x00], size: Int.random(in: 1_000...150_000, using: &generator)))
        }
        var whole = AnnexBAccessUnitSplitter()
        let expected = (whole.append(stream) + whole.finish()).map(\.nalUnits)
        #expect(expected.count == 12 && stream.count > 3 << 20)
        // The file is read in 1 MiB chunks (its NAL units are slices of them): some cross from one into the next.
        #expect(expected.joined().elementsEqual(writtenNALs))

        let path = try temporaryFile(stream, suffix: ".hevc")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let (fromFile, fileSink) = runToEnd(.hevcFile(path: path))
        #expect(fromFile.failure == nil)
        #expect(fileSink.units.map(\.nalUnits) == expected)
        #expect(fileSink.units.flatMap(\.nalUnitSlices).elementsEqual(writtenNALs) { $0.elementsEqual($1) })

        let fifo = FileManager.default.temporaryDirectory.appendingPathComponent("source-\(UUID().uuidString).hevc").path
        #expect(mkfifo(fifo, 0o600) == 0)
        defer { unlink(fifo) }
        let written = Data(stream)
        let writer = Thread {
            guard let handle = FileHandle(forWritingAtPath: fifo) else { return }
            handle.write(written)
            try? handle.close()
        }
        writer.start()
        let (fromFIFO, fifoSink) = runToEnd(.hevcFile(path: fifo))
        #expect(fromFIFO.failure == nil)
        #expect(fifoSink.units.map(\.nalUnits) == expected)
        #expect(fifoSink.units.flatMap(\.nalUnitSlices).elementsEqual(writtenNALs) { $0.elementsEqual($1) })
    }

    /// A source that fails before it knows its parameter sets says why by the time
    /// `waitUntilReady()` returns (`streamer send` checks `failure` right after it): the
    /// failure is set before the waiters are released, for an empty `.hevc` file and an empty
    /// y4m stream alike. Repeated, as the order once depended on which thread ran first.
    @Test func aFailureIsKnownWhenWaitUntilReadyReturns() throws {
        let empty = try temporaryFile([], suffix: ".hevc")
        defer { try? FileManager.default.removeItem(atPath: empty) }
        for _ in 0..<50 {
            let fromFile = LiveSource()
            fromFile.start(.hevcFile(path: empty), frameRate: 250, sink: CollectingSink())
            fromFile.waitUntilReady()
            #expect(fromFile.failure == .noAccessUnits(path: empty))
            let fromY4M = LiveSource()
            fromY4M.start(.y4m(try #require(InputFile(readingAtPath: empty)), frameRate: nil), frameRate: 250,
                          sink: CollectingSink())
            fromY4M.waitUntilReady()
            #expect(fromY4M.failure == .y4mEndedBeforeFirstFrame)
        }
    }

    @Test func failuresSayWhatFailedInOneLine() throws {
        let missing = "/nonexistent/\(UUID().uuidString).hevc"
        let (noFile, noFileSink) = runToEnd(.hevcFile(path: missing))
        #expect(noFile.failure == .cannotOpen(path: missing))
        #expect(noFile.failure?.description == "cannot open \(missing): no such file or not readable")
        #expect(noFileSink.finished && noFile.parameterSets.isEmpty)

        let empty = try temporaryFile([], suffix: ".hevc")
        defer { try? FileManager.default.removeItem(atPath: empty) }
        let (noUnits, _) = runToEnd(.hevcFile(path: empty))
        #expect(noUnits.failure?.description == "\(empty): no HEVC access units found (is it an Annex B .hevc file?)")

        let (noFrame, _) = runToEnd(.y4m(try #require(InputFile(readingAtPath: empty)), frameRate: nil))
        #expect(noFrame.failure == .y4mEndedBeforeFirstFrame)
        #expect(noFrame.failure?.description == "y4m input ended before its first frame")

        let garbage = try temporaryFile(Array("not a y4m stream at all\n".utf8), suffix: ".y4m")
        defer { try? FileManager.default.removeItem(atPath: garbage) }
        let (badY4M, _) = runToEnd(.y4m(try #require(InputFile(readingAtPath: garbage)), frameRate: nil))
        #expect(badY4M.failure == .y4m(.notY4M))
        #expect(badY4M.failure?.description == Y4MError.notY4M.description)
    }
}

/// The stall watch driven with instants of its own (no watch thread, no waiting).
struct SourceStallWatchTests {
    final class Events: Sendable {
        private let list = Mutex<[SourceStallEvent]>([])
        var all: [SourceStallEvent] { list.withLock { $0 } }
        func append(_ event: SourceStallEvent) { list.withLock { $0.append(event) } }
    }

    @Test func thresholdIsTenFrameIntervalsAndAtLeastHalfASecond() {
        #expect(SourceStallWatch.threshold(frameRate: 30) == .milliseconds(500))
        #expect(SourceStallWatch.threshold(frameRate: 10) == .seconds(1))
        #expect(SourceStallWatch.threshold(frameRate: 0) == .seconds(10))
    }

    @Test func aGapLongerThanTheThresholdIsOneStallToldOnceEachWay() {
        let events = Events()
        let watch = SourceStallWatch { events.append($0) }
        let start = ContinuousClock.now
        watch.frameDelivered(at: start)
        watch.frameDelivered(at: start + .milliseconds(400))  // under the threshold: no stall
        #expect(events.all.isEmpty)
        watch.frameDelivered(at: start + .milliseconds(2400))
        #expect(events.all == [.stalled(silence: .seconds(2)), .resumed(after: .seconds(2))])
        let stats = watch.stats(now: start + .seconds(3))
        #expect(stats == SourceStallStats(stalls: 1, stalledTime: .seconds(2), isStalled: false,
                                          threshold: .milliseconds(500)))
        watch.sourceEnded(at: start + .seconds(3))
        #expect(events.all.count == 2)
    }

    /// The watch thread's looks: none timed before the first frame; while frames come, the next
    /// look is when the gap since the last one would pass the threshold (not a fixed poll), and
    /// a look past it starts the stall; during a stall nothing is timed (a frame ends it); none
    /// after the end.
    @Test func theWatchLooksWhenTheGapWouldPassTheThreshold() throws {
        let events = Events()
        let watch = SourceStallWatch { events.append($0) }
        watch.setFrameRate(30)
        let start = ContinuousClock.now
        let before = try #require(watch.look(now: start))
        #expect(before.silence == nil && before.next == nil)
        watch.frameDelivered(at: start)
        watch.frameDelivered(at: start + .milliseconds(200))
        let flowing = try #require(watch.look(now: start + .milliseconds(300)))
        #expect(flowing.silence == nil && flowing.next == start + .milliseconds(700))
        let atThreshold = try #require(watch.look(now: start + .milliseconds(700)))
        #expect(atThreshold.silence == nil && atThreshold.next == start + .milliseconds(700))
        let past = try #require(watch.look(now: start + .milliseconds(701)))
        #expect(past.silence == .milliseconds(501) && past.next == nil)
        #expect(watch.stats(now: start + .milliseconds(701)).stalls == 1)
        let during = try #require(watch.look(now: start + .seconds(2)))
        #expect(during.silence == nil && during.next == nil)  // counted once
        #expect(watch.stats(now: start + .seconds(2)).stalls == 1)
        watch.frameDelivered(at: start + .seconds(3))
        #expect(events.all == [.resumed(after: .milliseconds(2800))])  // the look's `.stalled` is the thread's to tell
        #expect(try #require(watch.look(now: start + .seconds(3))).next == start + .milliseconds(3500))
        watch.sourceEnded(at: start + .seconds(4))
        #expect(watch.look(now: start + .seconds(4)) == nil)
    }

    @Test func theWatchThreadNoticesAStallWhileTheSourceIsBlocked() {
        let events = Events()
        let watch = SourceStallWatch { events.append($0) }
        watch.start(frameRate: 30)
        let last = ContinuousClock.now
        watch.frameDelivered(at: last)
        let deadline = Date().addingTimeInterval(10)
        while events.all.isEmpty && Date() < deadline { usleep(10_000) }
        guard case .stalled = events.all.first else {
            Issue.record("no stall noticed: \(events.all)")
            return
        }
        #expect(watch.stats.isStalled && watch.stats.stalls == 1)
        let end = ContinuousClock.now
        watch.sourceEnded(at: end)
        #expect(events.all.last == .endedWhileStalled(silence: end - last))
        #expect(watch.stats(now: end + .seconds(5)) == SourceStallStats(
            stalls: 1, stalledTime: end - last, isStalled: false, threshold: .milliseconds(500)))
    }
}
