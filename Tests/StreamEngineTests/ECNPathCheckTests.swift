import Testing
import UringIO
@testable import StreamEngine

/// `ECNPathCheck`: the verdict on what a path does to the ECN codepoint, from per-packet reports.
struct ECNPathCheckTests {
    /// Reports `count` packets arriving with `arrived`.
    func report(_ check: inout ECNPathCheck, _ arrived: ECNCodepoint, count: Int) {
        for _ in 0..<count { check.reported(arrived) }
    }

    @Test func aWindowDecidesByWhatMostOfItsPacketsShow() {
        var check = ECNPathCheck(sent: .ect1)
        #expect(check.verdict == .testing)
        // Carried (as sent, or CE: a mark is the codepoint working) until a window is full.
        report(&check, .ect1, count: 10)
        report(&check, .ce, count: ECNPathCheck.window - 11)
        #expect(check.verdict == .testing)
        check.reported(.ect1)
        #expect(check.verdict == .capable)
        // A window mostly Not-ECT: bleached; mostly the other ECT: remarked.
        report(&check, .notECT, count: ECNPathCheck.window / 2 + 1)
        report(&check, .ect1, count: ECNPathCheck.window / 2 - 1)
        #expect(check.verdict == .bleached)
        report(&check, .ect0, count: ECNPathCheck.window)
        #expect(check.verdict == .remarked)
        // Half and half decides nothing: the verdict stays.
        report(&check, .ect0, count: ECNPathCheck.window / 2)
        report(&check, .ect1, count: ECNPathCheck.window / 2)
        #expect(check.verdict == .remarked)
        #expect(check.asSent == 10 + 1 + ECNPathCheck.window / 2 - 1 + ECNPathCheck.window / 2)
        #expect(check.ce == ECNPathCheck.window - 11)
        #expect(check.bleached == ECNPathCheck.window / 2 + 1)
        #expect(check.remarked == ECNPathCheck.window + ECNPathCheck.window / 2)
    }

    @Test func aNewCodepointIsCheckedAfresh() {
        var check = ECNPathCheck(sent: .ect1)
        report(&check, .ect0, count: ECNPathCheck.window - 1)
        check.sending(.ect0)  // the window so far does not carry over
        #expect(check.verdict == .testing)
        report(&check, .ect0, count: ECNPathCheck.window)
        #expect(check.verdict == .capable)
        #expect(check.remarked == ECNPathCheck.window - 1 && check.asSent == ECNPathCheck.window)
    }

    @Test func notECTIsNotChecked() {
        var check = ECNPathCheck(sent: .notECT)
        report(&check, .notECT, count: 3 * ECNPathCheck.window)
        report(&check, .ce, count: ECNPathCheck.window)
        #expect(check.verdict == .notECT && check.asSent == 0 && check.ce == 0)
    }
}
