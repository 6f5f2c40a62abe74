import MediaFormats

/// The playout clock of the receiver's jitter buffer: every frame goes out the playout
/// latency after the kernel receive time of its first packet, not before (a frame complete
/// early waits; one that waited for a retransmission, or whose packets took longer than the
/// latency to come, goes out as soon as the depacketizer lets it). Frames leave in stream
/// order. Pure: arrival times and `now` are passed in (nanoseconds, CLOCK_REALTIME, the clock
/// of kernel receive timestamps), so the delay each frame was given, from its first packet's
/// kernel timestamp to its release, is measured here (`addedLatency`).
///
/// Memory is bounded: the first arrivals of at most `maxFrames` frames, and the frames of
/// one playout latency.
struct FramePlayout: Sendable {
    /// The earliest arrival of a packet of each frame not yet out, with its RTP timestamp: in a
    /// stream in order, the frame under assembly and perhaps the next one's first packets. A list,
    /// not a dictionary: a frame's lookups were three hashes of its timestamp.
    private var firstArrivals: [(timestamp: UInt32, first: Int64)] = []
    /// A frame out of the depacketizer and the arrival of its first packet; its unit is taken
    /// out (nil) when released.
    private struct Waiting {
        var unit: DepacketizedAccessUnit?
        let firstArrival: Int64
    }

    /// Frames waiting for their playout time, oldest first, from `head` on (those before it
    /// were released, their units taken out).
    private var waiting: [Waiting] = []
    private var head = 0
    /// Delay from the first packet's arrival to release, per frame (milliseconds).
    private(set) var addedLatency = RTTDistribution()
    /// The longest such delay (nanoseconds).
    private(set) var maxAddedLatency: Int64 = 0
    /// Most frames whose first arrival is remembered.
    static let maxFrames = 512

    /// Goes on measuring where `earlier` (a stream that ended) left off: its frames' delays
    /// and the longest one count with this stream's.
    mutating func carryMeasurements(from earlier: FramePlayout) {
        addedLatency = earlier.addedLatency
        maxAddedLatency = earlier.maxAddedLatency
    }

    /// The entry of `firstArrivals` the last arrival found or made, while it is there: a
    /// frame's packets come one after another, so most of them are not hashed.
    private var lastNoted: (timestamp: UInt32, first: Int64)?

    /// A packet of the frame with RTP timestamp `timestamp` arrived at `arrival`.
    mutating func noteArrival(timestamp: UInt32, arrival: Int64) {
        if let last = lastNoted, last.timestamp == timestamp, arrival >= last.first { return }
        if let index = firstArrivals.firstIndex(where: { $0.timestamp == timestamp }) {
            firstArrivals[index].first = min(firstArrivals[index].first, arrival)
            lastNoted = firstArrivals[index]
            return
        }
        if firstArrivals.count >= Self.maxFrames,
           let oldest = firstArrivals.indices.min(by: { firstArrivals[$0].first < firstArrivals[$1].first }) {
            firstArrivals.remove(at: oldest)
        }
        firstArrivals.append((timestamp, arrival))
        lastNoted = (timestamp, arrival)
    }

    /// Frames waiting for their playout time.
    var waitingCount: Int { waiting.count - head }

    /// A frame out of the depacketizer at `now`: it waits for its playout time. Frames of
    /// earlier timestamps whose first arrival is still remembered never came out (rejected
    /// whole): forgotten.
    mutating func hold(_ unit: consuming DepacketizedAccessUnit, now: Int64) {
        let timestamp = unit.timestamp
        let first = firstArrivals.firstIndex { $0.timestamp == timestamp }.map { firstArrivals.remove(at: $0).first } ?? now
        if lastNoted != nil { lastNoted = nil }
        if !firstArrivals.isEmpty { firstArrivals.removeAll { Int32(bitPattern: $0.timestamp &- timestamp) < 0 } }
        waiting.append(Waiting(unit: unit, firstArrival: first))
    }

    /// The first packet's arrival of the oldest waiting frame; nil when none waits.
    var nextFirstArrival: Int64? {
        head < waiting.count ? waiting[head].firstArrival : nil
    }

    /// Releases, in order, the frames whose playout time (first arrival + `latency`) is at or
    /// before `now`; with `all`, every frame (the stream ends).
    mutating func release(now: Int64, latency: Int64, all: Bool = false,
                          into output: (consuming DepacketizedAccessUnit) -> Void) {
        while head < waiting.count, all || waiting[head].firstArrival + latency <= now {
            // Moved out, not copied: a copy left behind `head` kept the frame's arrays alive
            // (and shared) until the list was compacted, so every array the caller gave back
            // for reuse was reallocated on its first write: a new allocation per NAL unit, its pages
            // faulted in (results/profile.md section 40).
            let unit = waiting[head].unit.take()!
            let first = waiting[head].firstArrival
            head += 1
            let added = max(0, now - first)
            addedLatency.record(Double(added) / 1e6)
            maxAddedLatency = max(maxAddedLatency, added)
            output(unit)
        }
        if head == waiting.count {
            if head > 0 { waiting.removeAll(keepingCapacity: true) }
            head = 0
        } else if head > 64 && head * 2 > waiting.count {
            waiting.removeFirst(head)
            head = 0
        }
    }
}
