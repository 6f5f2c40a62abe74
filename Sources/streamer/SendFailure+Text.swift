import StreamEngine

extension SenderStats {
    /// `errors` keyed by text, as the stats JSON and the messages name them: the C library's
    /// text for a send's errno (`Connection refused`), or `redirect: ` and what failed.
    var errorsByText: [String: Int] {
        Dictionary(errors.map { ($0.key.description, $0.value) }, uniquingKeysWith: +)
    }
}
