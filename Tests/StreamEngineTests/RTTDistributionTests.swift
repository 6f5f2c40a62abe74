import Glibc
import Testing
import TestSupport
@testable import StreamEngine

/// `RTTDistribution`: median and 95th percentile of a run's RTT samples, to 1 %, in a fixed
/// number of counters however many samples come.
struct RTTDistributionTests {
    @Test func emptyHasNoPercentiles() {
        let distribution = RTTDistribution()
        #expect(distribution.median == nil && distribution.percentile95 == nil && distribution.count == 0)
    }

    @Test func equalSamplesReadExactly() {
        var distribution = RTTDistribution()
        for _ in 0..<10 { distribution.record(74.72) }
        #expect(distribution.median == 74.72)
        #expect(distribution.percentile95 == 74.72)
    }

    /// 1...1000 ms, shuffled: the median is the 500th sample, the 95th percentile the 950th.
    @Test func percentilesOfAUniformRunWithinOnePercent() {
        var distribution = RTTDistribution()
        var generator = SystemRandomNumberGenerator()
        for sample in (1...1000).shuffled(using: &generator) { distribution.record(Double(sample)) }
        #expect(distribution.count == 1000)
        let median = try! #require(distribution.median)
        let p95 = try! #require(distribution.percentile95)
        #expect(abs(median - 500) / 500 <= 0.01, "median \(median)")
        #expect(abs(p95 - 950) / 950 <= 0.01, "p95 \(p95)")
    }

    /// The case: a run through a 150 ms queue, then idle samples. Only what is recorded
    /// counts (the sender records samples while media flows), and a few fast outliers move
    /// neither the median nor the 95th percentile.
    @Test func outliersDoNotDragTheMedian() {
        var distribution = RTTDistribution()
        for index in 0..<500 { distribution.record(140 + Double(index % 20)) }  // 140...159 ms
        for _ in 0..<10 { distribution.record(0.15) }
        let median = try! #require(distribution.median)
        let p95 = try! #require(distribution.percentile95)
        #expect(median >= 140 * 0.99 && median <= 159 * 1.01, "median \(median)")
        #expect(p95 >= 150 && p95 <= 159 * 1.01, "p95 \(p95)")
    }

    /// Memory does not grow with the run: a million samples, the same counters (the struct's
    /// storage is one fixed array), and extremes land in the end buckets.
    @Test func boundedWhateverTheRunLength() {
        var distribution = RTTDistribution()
        for index in 0..<1_000_000 { distribution.record(Double(index % 300) + 0.5) }
        distribution.record(0)
        distribution.record(1e9)
        distribution.record(-1)
        distribution.record(.nan)
        #expect(distribution.count == 1_000_002)
        #expect(RTTDistribution.bucketCount == 820)
        let median = try! #require(distribution.median)
        #expect(abs(median - 150) / 150 <= 0.01, "median \(median)")
        #expect(distribution.quantile(1) == 1e9)
        #expect(distribution.quantile(0) == 0)
    }

    /// Every quantile is the bucket of the sample of its rank, as a walk over the sorted samples
    /// finds it: the walk over groups of buckets, then one group's buckets, lands where a walk
    /// over all 820 buckets would (samples spread over every group, ranks on every group's edge).
    @Test func quantilesAreTheBucketOfTheSampleOfTheirRank() {
        var generator = SplitMix64(seed: 11)
        for round in 0..<20 {
            var distribution = RTTDistribution()
            let count = 1 + Int(generator.next() % 3000)
            var samples: [Double] = []
            for _ in 0..<count {
                // Log-uniform from 5 us to 200 s: every bucket group, and both open end buckets.
                let sample = 0.005 * Glibc.pow(40_000_000, Double(generator.next() % 1_000_001) / 1_000_000)
                samples.append(sample)
                distribution.record(sample)
            }
            samples.sort()
            for step in 0...200 {
                let fraction = Double(step) / 200
                let rank = max(1, Int((fraction * Double(count)).rounded(.up)))
                let sample = samples[min(rank, count) - 1]
                let expected = rank <= 1 ? samples[0] : rank >= count ? samples[count - 1]
                    : min(max(RTTDistribution.middle(of: RTTDistribution.bucket(of: sample)), samples[0]), samples[count - 1])
                #expect(distribution.quantile(fraction) == expected, "round \(round), fraction \(fraction), rank \(rank) of \(count)")
            }
        }
    }
}
