import Testing
import UringIO

struct ClockTests {
    /// Public durations are `Duration`; the ring counts in nanoseconds.
    @Test func durationInNanoseconds() {
        #expect(Duration.milliseconds(50).nanoseconds == 50_000_000)
        #expect(Duration.seconds(1.5).nanoseconds == 1_500_000_000)
        #expect(Duration.nanoseconds(7).nanoseconds == 7)
        #expect(Duration.zero.nanoseconds == 0)
        #expect(Duration.seconds(-2).nanoseconds == -2_000_000_000)
        #expect(Duration.seconds(Int64.max).nanoseconds == .max)
        #expect(Duration.seconds(Int64.min).nanoseconds == .min)
    }

    /// Whole nanoseconds toward zero, every Int64 count of nanoseconds back as it was, and the
    /// same as `components` gives (seconds and attoseconds) wherever that does not overflow.
    @Test func nanosecondsRoundTowardZeroAndRoundTrip() {
        #expect(Duration(secondsComponent: 0, attosecondsComponent: 999_999_999).nanoseconds == 0)
        #expect(Duration(secondsComponent: 0, attosecondsComponent: -1_999_999_999).nanoseconds == -1)
        #expect(Duration(secondsComponent: -3, attosecondsComponent: -500_000_000_700_000_000).nanoseconds == -3_500_000_000)
        for value: Int64 in [.max, .min, .max - 1, .min + 1, 1, -1, 123_456_789_012_345_678] {
            #expect(Duration.nanoseconds(value).nanoseconds == value)
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<10_000 {
            let seconds = Int64.random(in: -9_000_000_000...9_000_000_000, using: &generator)
            let fraction = Int64.random(in: 0...999_999_999_999_999_999, using: &generator)
            let duration = Duration(secondsComponent: seconds, attosecondsComponent: seconds < 0 ? -fraction : fraction)
            let (whole, attoseconds) = duration.components
            #expect(duration.nanoseconds == whole * 1_000_000_000 + attoseconds / 1_000_000_000)
        }
    }
}
