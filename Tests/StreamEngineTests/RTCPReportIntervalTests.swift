import MediaFormats
import Testing
import TestSupport
@testable import StreamEngine

/// RFC 3550 6.3 / A.7 report intervals, and the schedule with timer reconsideration.
@Suite struct RTCPReportIntervalTests {
    /// 1 Mbit/s: RTCP gets 6,250 octets/s, the receivers 4,687.5 of them.
    let megabit = 1_000_000.0

    func receiver(members: Int, reduced: Bool = false) -> RTCPReportInterval {
        RTCPReportInterval(members: members, senders: 1, sessionBandwidth: megabit, averagePacketSize: 100,
                           reducedMinimum: reduced)
    }

    @Test func theIntervalGrowsWithTheGroup() {
        // One member (itself): 100 / 6,250 s, far below the 5 s minimum (half before the first report).
        #expect(receiver(members: 1).deterministic() == 5)
        #expect(receiver(members: 1).deterministic(initial: true) == 2.5)
        // 32 members, one sender: 31 receivers share 4,687.5 octets/s: 3,100 / 4,687.5 = 0.661 s,
        // below the 5 s minimum, above the reduced one (360 / 1,000 kbit/s = 0.36 s).
        #expect(receiver(members: 32).deterministic() == 5)
        #expect(abs(receiver(members: 32, reduced: true).deterministic() - 3_100 / 4_687.5) < 1e-9)
        #expect(abs(receiver(members: 32, reduced: true).minimum() - 0.36) < 1e-9)
        // 1,000 members: 99,900 / 4,687.5 = 21.3 s, whatever the minimum.
        #expect(abs(receiver(members: 1000).deterministic() - 99_900 / 4_687.5) < 1e-9)
        #expect(abs(receiver(members: 1000, reduced: true).deterministic() - 99_900 / 4_687.5) < 1e-9)
        // The sender of 32 members has the senders' quarter to itself: 100 / 1,562.5 s, so the minimum.
        var sender = receiver(members: 32, reduced: true)
        sender.weSent = true
        #expect(abs(sender.deterministic() - 0.36) < 1e-9)
        // Two members, one a sender: senders are more than a quarter, the whole RTCP share is split by 2.
        #expect(abs(receiver(members: 2, reduced: true).deterministic() - 0.36) < 1e-9)
        // At 80 kbit/s (500 octets/s of RTCP): 200 / 500 = 0.4 s, under the reduced minimum of 360 / 80 = 4.5 s.
        let twoAtLowRate = RTCPReportInterval(members: 2, sessionBandwidth: 80_000, averagePacketSize: 100, reducedMinimum: true)
        #expect(twoAtLowRate.deterministic() == 4.5)
        // Below 72 kbit/s the reduced minimum would exceed 5 s: it is 5 s then.
        #expect(RTCPReportInterval(members: 2, sessionBandwidth: 8_000, averagePacketSize: 100, reducedMinimum: true).minimum() == 5)
    }

    @Test func randomizationSpansHalfToOneAndAHalfOverEMinusThreeHalves() {
        let interval = receiver(members: 1000)
        let d = interval.deterministic()
        #expect(abs(interval.randomized(0) - d * 0.5 / 1.218281828459045) < 1e-9)
        #expect(abs(interval.randomized(1) - d * 1.5 / 1.218281828459045) < 1e-9)
        #expect(abs(interval.randomized(0.5) - d / 1.218281828459045) < 1e-9)
    }

    /// 31 receivers of a 32-member group, each on its own schedule with reconsideration, over
    /// 20 simulated minutes: together they send at their share, 75 % of 5 % of the session
    /// bandwidth (the e - 3/2 compensation and reconsideration cancel out), within 10 %.
    @Test func receiversTogetherKeepToTheirShare() {
        var random = SplitMix64(seed: 7)
        let interval = receiver(members: 32, reduced: true)
        var schedules = (0..<31).map { _ in RTCPReportSchedule(interval: interval, now: 0, unit: random.nextUnit()) }
        let end: Int64 = 1_200_000_000_000
        var reports = 0
        while true {
            let index = schedules.indices.min { schedules[$0].next < schedules[$1].next }!
            let now = schedules[index].next
            guard now < end else { break }
            if schedules[index].reconsider(now: now, unit: random.nextUnit()) {
                schedules[index].reported(now: now, unit: random.nextUnit())
                reports += 1
            }
        }
        let octetsPerSecond = Double(reports * 100) / 1_200
        let share = megabit * 0.05 * 0.75 / 8
        #expect(octetsPerSecond > share * 0.9 && octetsPerSecond < share * 1.1, "\(octetsPerSecond) vs \(share)")
        // Each receiver reported about every 0.66 s: ~1,800 reports in 1,200 s.
        #expect(reports / 31 > 1_600 && reports / 31 < 2_000, "\(reports / 31)")
    }

    /// Reconsideration: a group that grew since the report was scheduled puts it off.
    @Test func aGrownGroupPutsTheReportOff() {
        var schedule = RTCPReportSchedule(interval: receiver(members: 2, reduced: true), now: 0, unit: 0.5)
        let first = schedule.next
        let firstGoes = schedule.reconsider(now: first, unit: 0.5)
        #expect(firstGoes)  // the first goes at its time
        schedule.reported(now: first, unit: 0.5)
        let due = schedule.next
        schedule.interval.members = 1000
        let goes = schedule.reconsider(now: due, unit: 0.5)
        #expect(!goes)
        #expect(schedule.next > due + 10_000_000_000)
        let early = schedule.reconsider(now: due + 1, unit: 0.5)
        #expect(!early, "not due yet")
    }
}
