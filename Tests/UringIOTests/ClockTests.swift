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
    }
}
