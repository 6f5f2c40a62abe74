import Foundation
import Glibc
import Testing
import TestSupport

/// The tests' view of /proc: `waitUntilBound` must see every binding, however many sockets are
/// open (the whole suite runs hundreds in parallel).
struct ProcFileTests {
    @Test func everyBindingIsSeenPastTheFirstPage() throws {
        var sockets: [Int32] = []
        defer { sockets.forEach { close($0) } }
        var ports: [UInt16] = []
        // 300 sockets: /proc/net/udp's lines are ~128 bytes, so the table runs to ten pages
        // (one page is all `String(contentsOfFile:)` read of it: 31 lines).
        for _ in 0..<300 {
            let socket = try #require(boundLoopbackUDPSocket())
            sockets.append(socket.fd)
            ports.append(socket.port)
        }
        let table = procFileText("/proc/net/udp")
        #expect(table.split(separator: "\n").count > 300)
        let missing = ports.filter { !udpTableHasBinding(table, port: $0, address: "127.0.0.1") }
        #expect(missing.count == 0, "bound ports not in the table read (of 300)")
        try waitUntilBound(port: ports[ports.count - 1])
    }
}
