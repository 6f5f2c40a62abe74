import Testing
@testable import streamer

/// `parseRate`: the rates `--bitrate`, `--pace`, `--min-bitrate` and `--max-bitrate` take.
struct RateOptionTests {
    @Test(arguments: [("900", 900.0), ("500k", 500e3), ("500K", 500e3), ("1.5M", 1.5e6), ("4m", 4e6),
                      ("2G", 2e9), ("0.5g", 0.5e9), ("1e3k", 1e6)])
    func suffixesMultiply(text: String, bitsPerSecond: Double) throws {
        #expect(try parseRate(text, option: "--pace") == bitsPerSecond)
        #expect(try parseRate(formatRate(bitsPerSecond), option: "--pace") == bitsPerSecond)
    }

    @Test(arguments: ["", "M", "k", "0", "-4M", "4T", "4MM", "four", "inf", "nanM", "4 M", "4M\u{301}"])
    func otherTextIsAUsageError(text: String) {
        #expect(throws: UsageError.self) { try parseRate(text, option: "--bitrate") }
    }
}
