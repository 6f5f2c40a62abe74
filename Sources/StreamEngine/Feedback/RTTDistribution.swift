import Glibc

/// The distribution of a run's RTT samples in bounded memory, for its median and 95th
/// percentile: a histogram of logarithmic buckets, each 2 % wide, from 10 us to about 100 s
/// (a fixed array of `bucketCount` counters, whatever the run's length). A percentile is
/// the geometric middle of its bucket (within 1 % of a sample in it), kept within the
/// smallest and largest sample seen, so a run of equal samples reads exactly (and the
/// first and last ranks are those samples).
struct RTTDistribution: Sendable, Equatable {
    /// The smallest RTT the buckets tell apart (milliseconds); smaller samples share the first.
    static let floorMilliseconds = 0.01
    /// Each bucket's upper edge over its lower one.
    static let ratio = 1.02
    /// Buckets: 0.01 ms x 1.02^820 is about 110 s; larger samples share the last.
    static let bucketCount = 820

    private var counts = [Int](repeating: 0, count: RTTDistribution.bucketCount)
    /// The samples in each run of `groupSize` buckets: a quantile walks these and then one
    /// group's buckets, not all 820 (twice per stats publication: results/profile.md section 32).
    private var groupCounts = [Int](repeating: 0, count: (RTTDistribution.bucketCount + groupSize - 1) / groupSize)
    /// Buckets per group.
    static let groupSize = 32
    /// Samples recorded.
    private(set) var count = 0
    private var smallest = Double.infinity
    private var largest = -Double.infinity

    /// An empty distribution.
    init() {}

    /// Records one sample (milliseconds); negative or non-finite ones are ignored.
    mutating func record(_ milliseconds: Double) {
        guard milliseconds.isFinite, milliseconds >= 0 else { return }
        let bucket = Self.bucket(of: milliseconds)
        counts[bucket] += 1
        groupCounts[bucket / Self.groupSize] += 1
        count += 1
        smallest = min(smallest, milliseconds)
        largest = max(largest, milliseconds)
    }

    /// The `fraction` quantile (0...1) of the samples, milliseconds (nil with none): the
    /// sample of rank ceil(fraction x count), to the bucket's resolution.
    func quantile(_ fraction: Double) -> Double? {
        guard count > 0 else { return nil }
        let rank = max(1, Int((fraction * Double(count)).rounded(.up)))
        // The first and last ranks are known exactly (the end buckets are open-ended).
        if rank <= 1 { return smallest }
        if rank >= count { return largest }
        var seen = 0
        for (group, groupCount) in groupCounts.enumerated() {
            guard seen + groupCount >= rank else { seen += groupCount; continue }
            let first = group * Self.groupSize
            for index in first..<min(first + Self.groupSize, Self.bucketCount) {
                seen += counts[index]
                if seen >= rank { return min(max(Self.middle(of: index), smallest), largest) }
            }
        }
        return largest
    }

    /// The median, milliseconds (nil with no samples).
    var median: Double? { quantile(0.5) }
    /// The 95th percentile, milliseconds (nil with no samples).
    var percentile95: Double? { quantile(0.95) }

    /// The bucket a sample (milliseconds) is counted in.
    static func bucket(of milliseconds: Double) -> Int {
        guard milliseconds > floorMilliseconds else { return 0 }
        let index = Int(Glibc.log(milliseconds / floorMilliseconds) / Glibc.log(ratio))
        return min(index, bucketCount - 1)
    }

    /// The geometric middle of `bucket` (milliseconds): what a quantile in it reads.
    static func middle(of bucket: Int) -> Double {
        floorMilliseconds * Glibc.pow(ratio, Double(bucket) + 0.5)
    }
}
