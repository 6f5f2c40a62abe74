import Glibc

/// An IPv4 or IPv6 UDP address (a `sockaddr_in` or `sockaddr_in6`), stored by value.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// The address family.
    public enum Family: Sendable { case ipv4, ipv6 }

    private var storage: sockaddr_storage
    /// The length of the stored sockaddr.
    public private(set) var length: socklen_t

    /// The address family.
    public var family: Family { storage.ss_family == sa_family_t(AF_INET6) ? .ipv6 : .ipv4 }

    /// Makes an address from a sockaddr of `length` bytes; nil for other families.
    public init?(_ address: UnsafeRawPointer, length: Int) {
        guard length >= MemoryLayout<sa_family_t>.size, length <= MemoryLayout<sockaddr_storage>.size else { return nil }
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: address, count: length)) }
        guard (storage.ss_family == sa_family_t(AF_INET) && length >= MemoryLayout<sockaddr_in>.size)
            || (storage.ss_family == sa_family_t(AF_INET6) && length >= MemoryLayout<sockaddr_in6>.size)
        else { return nil }
        self.storage = storage
        self.length = socklen_t(length)
    }

    /// Parses a numeric address and a port: `127.0.0.1`, `::1`, `0.0.0.0`.
    public init?(ip: String, port: UInt16) {
        var storage = sockaddr_storage()
        var length: socklen_t = 0
        let ok: Bool = withUnsafeMutableBytes(of: &storage) { raw in
            if ip.contains(":") {
                var sin6 = sockaddr_in6()
                sin6.sin6_family = sa_family_t(AF_INET6)
                sin6.sin6_port = port.bigEndian
                guard inet_pton(AF_INET6, ip, &sin6.sin6_addr) == 1 else { return false }
                withUnsafeBytes(of: &sin6) { raw.copyMemory(from: $0) }
                length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            } else {
                var sin = sockaddr_in()
                sin.sin_family = sa_family_t(AF_INET)
                sin.sin_port = port.bigEndian
                guard inet_pton(AF_INET, ip, &sin.sin_addr) == 1 else { return false }
                withUnsafeBytes(of: &sin) { raw.copyMemory(from: $0) }
                length = socklen_t(MemoryLayout<sockaddr_in>.size)
            }
            return true
        }
        guard ok else { return nil }
        self.storage = storage
        self.length = length
    }

    /// Parses `HOST:PORT`, `[IPV6]:PORT`, or (with `defaultHost`) a bare `PORT`.
    /// Host names are resolved with getaddrinfo (IPv4 preferred).
    public static func parse(_ text: String, defaultHost: String? = nil) throws(AddressError) -> SocketAddress {
        var host: Substring
        var portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw AddressError(text, "missing ']'") }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw AddressError(text, "expected [IPV6]:PORT") }
            portText = rest.dropFirst()
        } else if let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        } else if let defaultHost, !text.contains(":") {
            host = Substring(defaultHost)
            portText = Substring(text)
        } else {
            throw AddressError(text, "expected HOST:PORT")
        }
        if host.isEmpty, let defaultHost { host = Substring(defaultHost) }
        guard let port = UInt16(portText) else { throw AddressError(text, "port must be a number from 0 to 65535") }
        if let numeric = SocketAddress(ip: String(host), port: port) { return numeric }
        return try resolve(String(host), port: port, original: text)
    }

    private static func resolve(_ host: String, port: UInt16, original: String) throws(AddressError) -> SocketAddress {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let list else {
            throw AddressError(original, "cannot resolve '\(host)': \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(list) }
        var candidates: [SocketAddress] = []
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry {
            if let addr = current.pointee.ai_addr, let parsed = SocketAddress(addr, length: Int(current.pointee.ai_addrlen)) {
                candidates.append(parsed)
            }
            entry = current.pointee.ai_next
        }
        guard let best = candidates.first(where: { $0.family == .ipv4 }) ?? candidates.first else {
            throw AddressError(original, "'\(host)' has no IPv4 or IPv6 address")
        }
        return best
    }

    /// The port.
    public var port: UInt16 {
        get {
            withUnsafeBytes(of: storage) { raw in
                // sin_port and sin6_port sit at the same offset.
                UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self))
            }
        }
        set {
            withUnsafeMutableBytes(of: &storage) { raw in raw.storeBytes(of: newValue.bigEndian, toByteOffset: 2, as: UInt16.self) }
        }
    }

    /// Sets `sin6_scope_id` (offset 24 of a `sockaddr_in6`); only for IPv6.
    mutating func setScope(_ index: UInt32) {
        withUnsafeMutableBytes(of: &storage) { raw in raw.storeBytes(of: index, toByteOffset: 24, as: UInt32.self) }
    }

    /// The numeric host, without the port.
    public var host: String {
        withUnsafeBytes(of: storage) { raw -> String in
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            if family == .ipv6 {
                inet_ntop(AF_INET6, raw.baseAddress! + 8, &text, socklen_t(text.count))
            } else {
                inet_ntop(AF_INET, raw.baseAddress! + 4, &text, socklen_t(text.count))
            }
            return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// True for 127.0.0.0/8 and ::1.
    public var isLoopback: Bool {
        withUnsafeBytes(of: storage) { raw in
            if family == .ipv4 { return raw[4] == 127 }
            return (0..<15).allSatisfy { raw[8 + $0] == 0 } && raw[23] == 1
        }
    }

    /// `host:port`, or `[host]:port` for IPv6.
    public var description: String { family == .ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Calls `body` with a pointer to the sockaddr and its length.
    public func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: storage) { raw in
            try body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }

    /// Copies the sockaddr into `destination` (at least 128 bytes) and returns its length.
    func copy(to destination: UnsafeMutableRawPointer) -> socklen_t {
        withUnsafeBytes(of: storage) { destination.copyMemory(from: $0.baseAddress!, byteCount: Int(length)) }
        return length
    }

    public static func == (lhs: SocketAddress, rhs: SocketAddress) -> Bool {
        guard lhs.length == rhs.length else { return false }
        return withUnsafeBytes(of: lhs.storage) { a in
            withUnsafeBytes(of: rhs.storage) { b in
                memcmp(a.baseAddress!, b.baseAddress!, Int(lhs.length)) == 0
            }
        }
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes(of: storage) { hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: $0.prefix(Int(length)))) }
    }
}

/// A `HOST:PORT` text that is not an address.
public struct AddressError: Error, Sendable, CustomStringConvertible {
    /// The text given.
    public let text: String
    /// What is wrong with it.
    public let problem: String
    init(_ text: String, _ problem: String) { self.text = text; self.problem = problem }
    public var description: String { "invalid address '\(text)': \(problem)" }
}
