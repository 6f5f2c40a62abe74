// The test build's `fuzzCheck`: the FuzzCorpusTests target (Package.swift) compiles the
// oracles (Fuzz/Oracles) with this instead of Fuzz/Support/FuzzCheck.swift, so a violated
// invariant fails the test case of the corpus entry that broke it and the replay goes on.

import Testing

/// Records a test issue (attributed to the running test case) when `condition` is false.
func fuzzCheck(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
               fileID: String = #fileID, filePath: String = #filePath, line: Int = #line, column: Int = #column) {
    if !condition() {
        Issue.record("fuzz invariant violated: \(message())",
                     sourceLocation: SourceLocation(fileID: fileID, filePath: filePath, line: line, column: column))
    }
}
