/// The rate of a stream of access units on its own timeline: the bytes of the units whose
/// times (due times when they have them) fall in the last `window` before the newest one's,
/// over the time they span. What a recorded file's frames ask of the wire, whatever the
/// encoder that made them was told.
///
/// Of n units in the window, the first one's bytes are not counted: the other n - 1 came
/// in the time from the first to the last, so frames of B bytes every T give B / T exactly
/// (counting all n over that span would overstate it by n / (n - 1)). Fixed storage: at most
/// `capacity` units are remembered (the window then spans fewer, the newest); nothing is
/// allocated after `init`.
struct StreamRateMeter {
    private var times: [Int64]
    private var bytes: [Int]
    /// Index of the oldest unit remembered, and how many are.
    private var head = 0
    private var count = 0
    /// Bytes of every unit remembered (the oldest among them).
    private var sum = 0
    /// How far back from the newest unit's time the rate looks (nanoseconds).
    let window: Int64

    init(window: Int64 = 1_000_000_000, capacity: Int = 256) {
        precondition(window > 0 && capacity >= 2)
        self.window = window
        times = Array(repeating: 0, count: capacity)
        bytes = Array(repeating: 0, count: capacity)
    }

    /// A unit of `byteCount` bytes at `time` (nanoseconds; a time before the newest one's is
    /// taken as the newest one's: the timeline does not run back).
    mutating func add(byteCount: Int, at time: Int64) {
        let capacity = times.count
        let newest = count > 0 ? max(time, times[(head + count - 1) % capacity]) : time
        if count == capacity { drop() }
        let slot = (head + count) % capacity
        times[slot] = newest
        bytes[slot] = byteCount
        sum += byteCount
        count += 1
        while count > 1 && newest - times[head] > window { drop() }
    }

    private mutating func drop() {
        sum -= bytes[head]
        head = (head + 1) % times.count
        count -= 1
    }

    /// Bits per second over the units remembered; nil until two units with different times came.
    var bitsPerSecond: Double? {
        guard count > 1 else { return nil }
        let span = times[(head + count - 1) % times.count] - times[head]
        guard span > 0 else { return nil }
        return Double(sum - bytes[head]) * 8e9 / Double(span)
    }
}
