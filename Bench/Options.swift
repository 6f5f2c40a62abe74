/// The command line of `bench` (see README.md, section bench).
struct BenchOptions {
    enum Mode { case both, send, recv }

    var mode = Mode.both
    var quick = false
    var sendPaths = SendPath.allCases
    var receivePaths = ReceivePath.measured
    var size = 1200
    var count: Int?
    var batch = 64
    var repeats: Int?
    var out = "results"
    var sweep: Bool?
    var window: Int?
    var listen: String?
    var to: String?
    var control = "tcp"
    var receiveBuffer = 64 << 20
    var pacing: Bool?
    var streamSize = 1472

    static let usage = """
        usage: bench [--quick] [--paths sendto,sendmmsg,uring,uring-gso,uring-gso-zc,uring-linked,stream,stream-srtp,stream-srtp-gcm]
                     [--size BYTES] [--count N] [--batch N] [--repeat N] [--out DIR]
                     [--recv-paths recvfrom,recvmmsg,uring,uring-gro] [--sweep | --no-sweep] [--window N]
                     [--stream-size BYTES] [--pacing | --no-pacing]
               bench recv --listen [ADDR:]PORT [--recv-paths LIST] [--batch N]
               bench send --to HOST:PORT [the options of bench]

        Measures CPU and system calls per datagram of each send path against plain sendto,
        with the receiver in a separate process on loopback (or on another host with
        bench recv / bench send; the control channel is TCP on the same port number).

          --quick          smaller counts, one warm-up and three repetitions; under a minute
          --paths LIST     send paths (default: all); uring-linked is uring with linked SQEs
                           (PacedSenderConfig.ordered = true); stream is the media path (pre-encoded
                           1280x720 HEVC through an unpaced MediaSender), run in its own group beside
                           sendto and uring-gso at --stream-size; stream-srtp and stream-srtp-gcm are
                           stream with SRTP (AES_CM_128_HMAC_SHA1_80, AEAD_AES_128_GCM) in that group
          --stream-size    largest datagram of the stream group: MTU - 28 (default 1472, MTU 1500)
          --pacing         PacedSender at 10 Mbit/s, 100 Mbit/s and 1 Gbit/s, 1200-byte datagrams, rate
                           and bursts from the receiver's kernel timestamps; and live video: x265 frames
                           at 4 and 20 Mbit/s handed at 30 fps in real time to a MediaSender paced at
                           1.5 x, enters per datagram and frame spreads (on by default; --no-pacing)
          --recv-paths     receive paths (default: all); each send path runs against each
          --size BYTES     UDP payload per datagram, 20...65507 (default 1200)
          --count N        datagrams per round (default 200000, quick 50000)
          --batch N        datagrams per submission / sendmmsg call, 1...1024 (default 64)
          --repeat N       measured rounds per path, interleaved (default 5, quick 2)
          --out DIR        where bench.json and bench.csv go (default results/)
          --sweep          also sweep sizes 200,1200,1472,8972 and batches 1,8,64,256
                           (on by default in a full run, off with --quick or --no-sweep)
          --window N       flow window: datagrams sent but not yet seen by the receiver
        """

    static func parse(_ arguments: [String]) throws(BenchError) -> BenchOptions {
        var options = BenchOptions()
        var rest = BenchArguments(arguments)
        if let first = rest.first, first == "recv" || first == "send" {
            options.mode = first == "recv" ? .recv : .send
            _ = rest.popFirst()
        }
        func value(_ name: String) throws(BenchError) -> String { try rest.value(name) }
        func number(_ name: String, _ range: ClosedRange<Int>) throws(BenchError) -> Int { try rest.number(name, range) }
        while let argument = rest.popFirst() {
            switch argument {
            case "--help", "-h": throw .usage("help")
            case "--quick": options.quick = true
            case "--paths" where options.mode == .recv, "--path" where options.mode == .recv:
                options.receivePaths = try receivePaths(argument, try value(argument))
            case "--recv-paths":
                options.receivePaths = try receivePaths(argument, try value(argument))
            case "--paths", "--path":
                let text = try value(argument)
                var paths: [SendPath] = []
                for name in text.split(separator: ",") {
                    guard let path = SendPath(rawValue: String(name)) else {
                        throw .usage("\(argument): unknown send path '\(name)' (one of \(SendPath.allCases.map(\.rawValue).joined(separator: ",")))")
                    }
                    if !paths.contains(path) { paths.append(path) }
                }
                if paths.isEmpty { throw .usage("\(argument) needs at least one path") }
                options.sendPaths = paths
            case "--size": options.size = try number(argument, BenchDatagram.minimumSize...65_507)
            case "--count": options.count = try number(argument, 1...100_000_000)
            case "--batch": options.batch = try number(argument, 1...1024)
            case "--repeat": options.repeats = try number(argument, 1...1000)
            case "--window": options.window = try number(argument, 1...10_000_000)
            case "--out": options.out = try value(argument)
            case "--stream-size": options.streamSize = try number(argument, 100...65_507)
            case "--pacing": options.pacing = true
            case "--no-pacing": options.pacing = false
            case "--sweep": options.sweep = true
            case "--no-sweep": options.sweep = false
            case "--listen": options.listen = try value(argument)
            case "--to": options.to = try value(argument)
            case "--control":
                options.control = try value(argument)
                guard options.control == "tcp" || options.control == "stdio" else {
                    throw .usage("--control must be tcp or stdio")
                }
            default: throw .usage("unknown option '\(argument)' (see bench --help)")
            }
        }
        if options.mode == .recv && options.listen == nil { throw .usage("--listen is required for bench recv") }
        if options.mode == .send && options.to == nil { throw .usage("--to is required for bench send") }
        return options
    }

    private static func receivePaths(_ option: String, _ text: String) throws(BenchError) -> [ReceivePath] {
        var paths: [ReceivePath] = []
        for name in text.split(separator: ",") {
            guard let path = ReceivePath(rawValue: String(name)) else {
                throw .usage("\(option): unknown receive path '\(name)' (one of \(ReceivePath.allCases.map(\.rawValue).joined(separator: ",")))")
            }
            if !paths.contains(path) { paths.append(path) }
        }
        if paths.isEmpty { throw .usage("\(option) needs at least one path") }
        return paths
    }

    /// Datagrams per measured round.
    var roundCount: Int { count ?? (quick ? 50_000 : 200_000) }
    /// Measured rounds per path.
    var repeatCount: Int { repeats ?? (quick ? 3 : 5) }
    /// Whether the size and batch sweeps run.
    var runsSweeps: Bool { sweep ?? !quick }
    /// Whether the pacing rounds run.
    var runsPacing: Bool { pacing ?? true }
}

/// A bench command's arguments, taken from the front: options, their values, and whole
/// numbers checked against a range, with one wording of the errors for every command.
struct BenchArguments {
    private var rest: ArraySlice<String>

    init(_ arguments: [String]) { rest = arguments[...] }

    /// The next argument, not taken.
    var first: String? { rest.first }

    /// Takes the next argument (nil at the end).
    mutating func popFirst() -> String? { rest.popFirst() }

    /// Takes the value of `option`: the next argument, which may not be another option.
    mutating func value(_ option: String) throws(BenchError) -> String {
        guard let next = rest.first, !next.hasPrefix("--") else { throw .usage("\(option) needs a value") }
        rest = rest.dropFirst()
        return next
    }

    /// Takes the value of `option` as a whole number in `range`.
    mutating func number(_ option: String, _ range: ClosedRange<Int>) throws(BenchError) -> Int {
        try Self.number(option, try value(option), in: range)
    }

    /// `text`, a value of `option`, as a whole number in `range`.
    static func number(_ option: String, _ text: String, in range: ClosedRange<Int>) throws(BenchError) -> Int {
        guard let value = Int(text), range.contains(value) else {
            throw .usage("\(option) \(text): expected a whole number in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }
}
