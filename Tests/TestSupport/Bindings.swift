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

/// Something did not bind in time.
public struct NotBoundError: Error, CustomStringConvertible {
    public let description: String
}

/// Waits until something has bound UDP `port` (on `address`, IPv4, when given), read from
/// /proc/net/udp without touching the port, up to 10 s.
public func waitUntilBound(port: UInt16, address: String? = nil) throws {
    let deadline = Date().addingTimeInterval(10)
    while Date() < deadline {
        let table = (try? String(contentsOfFile: "/proc/net/udp", encoding: .utf8)) ?? ""
        if udpTableHasBinding(table, port: port, address: address) { return }
        Thread.sleep(forTimeInterval: 0.02)
    }
    throw NotBoundError(description: "nothing bound UDP \(address ?? "*"):\(port) within 10 s")
}
