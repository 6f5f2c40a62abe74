import Glibc
import UringIO

let usage = """
usage: streamer <command> [options]
  send   send an HEVC RTP stream (streamer send --help)
  recv   receive one (streamer recv --help)
  demo   send and receive on loopback, print a summary
  version  print the version (also --version)
"""

var arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else {
    printError(usage)
    exit(2)
}
arguments.removeFirst()
do {
    let code: Int32
    switch command {
    case "send": code = try runSend(arguments)
    case "recv": code = try runRecv(arguments)
    case "demo": code = try runDemo(arguments)
    case "--version", "version":
        print(versionLine)
        code = 0
    case "--help", "-h", "help":
        print(usage)
        code = 0
    default: throw UsageError("unknown command '\(command)' (send, recv, demo, version)")
    }
    exit(code)
} catch let error as UsageError {
    printError("streamer: \(error)")
    exit(2)
} catch {
    printError("streamer: \(error)")
    exit(1)
}
