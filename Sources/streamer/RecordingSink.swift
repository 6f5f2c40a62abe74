import Glibc
import MediaFormats
import Synchronization

/// `streamer send --record PATH`: stands in front of the sender and writes every access unit it
/// hands on into PATH as Annex B (a 4-byte start code before each NAL unit), one write(2) per
/// access unit on the source's thread: what x265 made of a synthetic or y4m source, to send
/// again or to packetize elsewhere (`bench peers` feeds it to its floor sender).
final class RecordingSink: AccessUnitSink {
    private let sink: any AccessUnitSink
    private let descriptor: Int32
    let path: String
    /// The first write failure (errno), 0 while none.
    private let failure = Atomic<Int32>(0)

    /// Creates (or truncates) `path`; a usage error when it cannot.
    init(path: String, sink: any AccessUnitSink) throws {
        descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw UsageError("--record: cannot create '\(path)': \(String(cString: strerror(errno)))")
        }
        self.path = path
        self.sink = sink
    }

    deinit { close(descriptor) }

    /// Why writing the file failed, if it did.
    var writeError: String? {
        let code = failure.load(ordering: .relaxed)
        return code == 0 ? nil : "--record: writing '\(path)' failed: \(String(cString: strerror(code)))"
    }

    private func record(_ accessUnit: AccessUnit) {
        guard failure.load(ordering: .relaxed) == 0 else { return }
        var bytes = [UInt8]()
        bytes.reserveCapacity(accessUnit.nalUnits.reduce(0) { $0 + 4 + $1.count })
        for unit in accessUnit.nalUnits { bytes += [0, 0, 0, 1] + unit }
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written != bytes.count { failure.store(written < 0 ? errno : EIO, ordering: .relaxed) }
    }

    func send(_ accessUnit: AccessUnit) -> Bool {
        record(accessUnit)
        return sink.send(accessUnit)
    }

    func send(_ accessUnit: AccessUnit, at dueTime: Int64) -> Bool {
        record(accessUnit)
        return sink.send(accessUnit, at: dueTime)
    }

    var holdsUntilDue: Bool { sink.holdsUntilDue }
    func finish() { sink.finish() }
    func takeKeyframeRequest() -> Bool { sink.takeKeyframeRequest() }
}
