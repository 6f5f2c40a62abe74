import Foundation

/// Whether a /proc/net/udp or /proc/net/udp6 `table` has a socket bound to `port` (and, for
/// IPv4, to `address` when given; nil: any address).
public func udpTableHasBinding(_ table: String, port: UInt16, address: String? = nil) -> Bool {
    var wanted = ":" + String(format: "%04X", port)
    if let address {
        var raw = in_addr()
        inet_pton(AF_INET, address, &raw)
        wanted = String(format: "%08X", raw.s_addr) + wanted  // the table shows the address in host order
    }
    return table.split(separator: "\n").contains { line in
        guard let local = line.split(separator: " ").dropFirst().first else { return false }
        return address == nil ? local.hasSuffix(wanted) : local == Substring(wanted)
    }
}

/// The whole of a /proc file ("" when it cannot be read). `String(contentsOfFile:)` reads one
/// page of a file whose size the kernel reports as 0: 3,968 bytes of /proc/net/udp, 31 of its
/// 376 lines with 300 sockets open. A binding further down the table was never seen, which made
/// tests that start a peer once its port is bound fail when many sockets were open (a CI run
/// of the whole suite: "ffmpeg did not open port", ffmpeg bound and waiting).
public func procFileText(_ path: String) -> String {
    guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
    defer { try? handle.close() }
    return String(decoding: (try? handle.readToEnd()) ?? Data(), as: UTF8.self)
}

/// Something did not bind in time.
public struct NotBoundError: Error, CustomStringConvertible {
    public let description: String
}

/// Waits until something has bound UDP `port` (on `address`, IPv4, when given), read from
/// /proc/net/udp without touching the port, up to 10 s.
public func waitUntilBound(port: UInt16, address: String? = nil) throws {
    let deadline = Date().addingTimeInterval(10)
    while Date() < deadline {
        if udpTableHasBinding(procFileText("/proc/net/udp"), port: port, address: address) { return }
        Thread.sleep(forTimeInterval: 0.02)
    }
    throw NotBoundError(description: "nothing bound UDP \(address ?? "*"):\(port) within 10 s")
}

/// A UDP socket bound to 127.0.0.1 on a port the kernel picks, and that port; nil when the
/// socket cannot be made. The caller closes it.
public func boundLoopbackUDPSocket() -> (fd: Int32, port: UInt16)? {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    guard bound else {
        close(fd)
        return nil
    }
    return (fd, UInt16(bigEndian: address.sin_port))
}
