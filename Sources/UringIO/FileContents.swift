import Glibc

/// The bytes of a small file read to its end with read(2) (a /proc file too, whose size stat(2)
/// reports as 0); nil when it cannot be opened or read, or holds more than `limit` bytes. For
/// the short text files the engine's users read (SDP files, key files, /proc entries) without
/// Foundation (results/profile.md section 35).
public func contentsOfFile(atPath path: String, limit: Int = 1 << 20) -> [UInt8]? {
    let file = open(path, O_RDONLY | O_CLOEXEC)
    guard file >= 0 else { return nil }
    defer { close(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(file, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        guard count >= 0, bytes.count + count <= limit else { return nil }
        if count == 0 { return bytes }
        bytes += chunk[..<count]
    }
}

/// Writes all of `bytes` to `descriptor` with write(2), again after EINTR and for what a short
/// write left; the errno of a failure (EIO for a write of nothing), or nil. For the lines and
/// files the engine's programs write without Foundation (results/profile.md section 35).
public func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
    var offset = 0
    while offset < bytes.count {
        let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
        if written < 0 {
            if errno == EINTR { continue }
            return errno
        }
        if written == 0 { return EIO }
        offset += written
    }
    return nil
}

/// Writes `text` and a newline to standard error: its UTF-8 bytes with ``writeAll(_:_:)``.
/// Not `FileHandle.write(Data(text.utf8))`: that `Data` is made by casting the string's UTF-8
/// view to a protocol at run time, and a process's first such cast searches every protocol
/// conformance in it (~1 ms of `streamer recv`'s summary line; results/profile.md section 34).
public func printError(_ text: String) {
    var line = text + "\n"
    _ = line.withUTF8 { writeAll(STDERR_FILENO, UnsafeRawBufferPointer($0)) }
}
