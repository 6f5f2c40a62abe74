import Testing
@testable import StreamEngine

/// `Pacer` (Sources/StreamEngine/Transport/Pacer.swift) on a synthetic clock: every time is a
/// number of nanoseconds the test chooses, so the figures below are exact.
@Suite struct PacerTests {
    /// 8 Mbit/s is 1,000 bytes per millisecond: round numbers throughout.
    static let rate = 8_000_000.0
    static let millisecond: Int64 = 1_000_000

    @Test func defaultQuantumIsTwoMillisecondsOfTheRateWithinItsBounds() {
        #expect(Pacer.defaultQuantum(rateBitsPerSecond: 100_000_000, minimum: 1500) == 25_000)
        #expect(Pacer.defaultQuantum(rateBitsPerSecond: 1_000_000, minimum: 1500) == 1500)  // 250 B is below a datagram
        #expect(Pacer.defaultQuantum(rateBitsPerSecond: 10_000_000_000, minimum: 1500) == 65_536)
    }

    /// A fixed pace's quantum: twenty-four datagrams where a frame interval at 30 fps of the rate
    /// holds them, that interval of it where it does not (never below a datagram), 2 ms of it
    /// where that is more, at most 64 KiB.
    @Test func fixedPaceQuantumHoldsSeveralDatagramsWithinAFrameIntervalOfTheRate() {
        #expect(Pacer.fixedPaceQuantum(rateBitsPerSecond: 8_000_000, datagram: 1400) == 33_333)  // 33.3 ms < 24 datagrams
        #expect(Pacer.fixedPaceQuantum(rateBitsPerSecond: 20_000_000, datagram: 1400) == 33_600)  // 24 datagrams
        #expect(Pacer.fixedPaceQuantum(rateBitsPerSecond: 1_000_000, datagram: 1400) == 4_166)  // 33.3 ms: three datagrams
        #expect(Pacer.fixedPaceQuantum(rateBitsPerSecond: 300_000, datagram: 1400) == 1400)  // 1,250 B: one datagram
        #expect(Pacer.fixedPaceQuantum(rateBitsPerSecond: 100_000_000, datagram: 1400) == 33_600)  // 24 datagrams > 2 ms
        #expect(Pacer.fixedPaceQuantum(rateBitsPerSecond: 200_000_000, datagram: 1400) == 50_000)  // 2 ms rules
        #expect(Pacer.fixedPaceQuantum(rateBitsPerSecond: 10_000_000_000, datagram: 1400) == 65_536)
    }

    /// A new pacer holds one quantum: that much may go at once, and no more.
    @Test func startsWithOneQuantumOfBudget() {
        var pacer = Pacer(rateBitsPerSecond: Self.rate, burstQuantum: 3000, now: 0)
        #expect(pacer.available(now: 0) == 3000)
        #expect(pacer.delay(for: 3000, now: 0) == 0)
        pacer.consume(3000, now: 0)
        #expect(pacer.available(now: 0) == 0)
        #expect(pacer.delay(for: 1000, now: 0) == Self.millisecond)
        #expect(pacer.delay(for: 1500, now: 0) == Self.millisecond * 3 / 2)
    }

    /// Budget refills at the rate, and an idle pacer never saves up more than a quantum.
    @Test func refillsAtTheRateUpToTheQuantum() {
        var pacer = Pacer(rateBitsPerSecond: Self.rate, burstQuantum: 3000, now: 0)
        pacer.consume(3000, now: 0)
        #expect(pacer.available(now: Self.millisecond) == 1000)
        #expect(pacer.available(now: 2 * Self.millisecond) == 2000)
        #expect(pacer.available(now: 10_000 * Self.millisecond) == 3000)  // ten idle seconds: still one quantum
        // A clock reading that goes back adds nothing.
        pacer.consume(3000, now: 10_000 * Self.millisecond)
        #expect(pacer.available(now: 5_000 * Self.millisecond) == 0)
    }

    /// A datagram larger than the quantum is not held forever: it needs a full bucket, not its size.
    @Test func aDatagramLargerThanTheQuantumNeedsAFullBucket() {
        var pacer = Pacer(rateBitsPerSecond: Self.rate, burstQuantum: 2000, now: 0)
        #expect(pacer.delay(for: 9000, now: 0) == 0)
        pacer.consume(9000, now: 0)  // the debt is paid back before anything else goes
        #expect(pacer.delay(for: 1000, now: 0) == 8 * Self.millisecond)
        #expect(pacer.delay(for: 1000, now: 8 * Self.millisecond) == 0)
    }

    /// A greedy sender of 1,200-byte datagrams, released whenever the pacer allows, looked at
    /// every 50 us for a second: over every prefix, what went out is within quantum + rate x t,
    /// and over the second it is the rate, less than one datagram short.
    @Test func greedySenderStaysUnderTheTokenBucketLine() {
        let quantum = 4000
        var pacer = Pacer(rateBitsPerSecond: Self.rate, burstQuantum: quantum, now: 0)
        var released = 0
        var worstExcess = Int.min
        var now: Int64 = 0
        while now <= 1000 * Self.millisecond {
            while pacer.delay(for: 1200, now: now) == 0 {
                pacer.consume(1200, now: now)
                released += 1200
            }
            let line = quantum + Int(now / Self.millisecond) * 1000 + Int(now % Self.millisecond) / 1000
            worstExcess = max(worstExcess, released - line)
            now += 50_000
        }
        #expect(worstExcess <= 0, "released \(worstExcess) B above quantum + rate x t")
        #expect(released > quantum + 1_000_000 - 1200 && released <= quantum + 1_000_000)
    }

    @Test func unpacedReleasesEverything() {
        var pacer = Pacer(rateBitsPerSecond: nil, burstQuantum: 1500, now: 0)
        pacer.consume(1_000_000, now: 0)
        #expect(pacer.available(now: 0) == Int.max)
        #expect(pacer.delay(for: 65_000, now: 0) == 0)
    }

    /// A new rate applies from now on; the saved budget shrinks to a smaller quantum.
    @Test func setRateChangesTheRateAndClampsTheBudget() {
        var pacer = Pacer(rateBitsPerSecond: Self.rate, burstQuantum: 8000, now: 0)
        pacer.setRate(Self.rate * 2, burstQuantum: 2000, now: 0)
        #expect(pacer.rateBitsPerSecond == Self.rate * 2 && pacer.burstQuantum == 2000)
        #expect(pacer.available(now: 0) == 2000)
        pacer.consume(2000, now: 0)
        #expect(pacer.delay(for: 1000, now: 0) == Self.millisecond / 2)  // 2,000 bytes per ms now
        pacer.setRate(nil, burstQuantum: 2000, now: 0)
        #expect(pacer.delay(for: 1000, now: 0) == 0)
    }
}
