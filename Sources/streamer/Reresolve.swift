import StreamEngine
import UringIO

/// SIGHUP: resolves every `--to` again and moves each flow whose address changed; one line
/// on stderr per flow that moved or could not be resolved.
func reresolve(_ targets: [SendOptions.Target], sender: MediaSender) {
    let current = sender.allStats
    for (index, target) in targets.enumerated() {
        do {
            let address = try SocketAddress.parse(target.text)
            let now = current[index].destination
            guard "\(address)" != now else { continue }
            guard address.family == target.address.family else {
                printError("streamer send: SIGHUP: \(target.text) now resolves to \(address), another address family; staying at \(now)")
                continue
            }
            printError("streamer send: SIGHUP: \(target.text) now resolves to \(address) (was \(now)); moving the flow")
            sender.redirect(to: address, flow: index)
        } catch {
            printError("streamer send: SIGHUP: cannot resolve \(target.text) (\(error)); staying at \(current[index].destination)")
        }
    }
}
