// The fuzzing build's `fuzzCheck`: tools/fuzz compiles it into every target. The test
// target replays the corpus with its own (Fuzz/Tests/FuzzCheck+Testing.swift), which records
// a test issue instead of crashing.

/// Fails the run with a message libFuzzer reports as a crash (the input is saved).
func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
               file: StaticString = #file, line: UInt = #line) {
    if !condition() {
        fatalError("fuzz invariant violated: \(message())", file: file, line: line)
    }
}
