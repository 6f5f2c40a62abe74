import MediaFormats

/// Where a ``LiveSource``'s access units come from: the sources of `streamer send --source`.
public enum MediaSource: Sendable {
    /// The moving test pattern of ``SyntheticSource`` at `width` x `height` (even), encoded
    /// live by x265.
    case synthetic(width: Int, height: Int)
    /// An Annex B H.265 file (`.hevc`), sent as it is, one access unit per frame interval.
    case hevcFile(path: String)
    /// y4m frames read from `file` (a file, or ``InputFile/standardInput``), encoded live by x265; `frameRate`
    /// overrides the header's frame rate.
    case y4m(InputFile, frameRate: Int?)
}

/// Why a ``LiveSource`` stopped before its end: each case reads as the one line
/// `streamer send` prints.
public enum MediaSourceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The `.hevc` file cannot be opened.
    case cannotOpen(path: String)
    /// The `.hevc` file holds no HEVC access unit (not Annex B, or empty).
    case noAccessUnits(path: String)
    /// The y4m input ended before its first frame.
    case y4mEndedBeforeFirstFrame
    /// The y4m input is malformed.
    case y4m(Y4MError)
    /// x265 could not be opened or could not encode a frame.
    case encoder(EncoderError)

    /// One line: what failed, with what.
    public var description: String {
        switch self {
        case let .cannotOpen(path): return "cannot open \(path): no such file or not readable"
        case let .noAccessUnits(path): return "\(path): no HEVC access units found (is it an Annex B .hevc file?)"
        case .y4mEndedBeforeFirstFrame: return "y4m input ended before its first frame"
        case let .y4m(error): return error.description
        case let .encoder(error): return error.description
        }
    }
}
