import Glibc
import UringIO

/// The datagrams waiting at `socket`, in the order they arrived, read without blocking until
/// none is left (each at most `size` bytes).
func pendingDatagrams(at socket: UDPSocket, size: Int = 65536) -> [[UInt8]] {
    var datagrams: [[UInt8]] = []
    var buffer = [UInt8](repeating: 0, count: size)
    while true {
        let count = buffer.withUnsafeMutableBytes { recv(socket.fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        guard count > 0 else { return datagrams }
        datagrams.append(Array(buffer[0..<count]))
    }
}
