/// Why the HEVC encoder could not be configured or could not encode a frame.
///
/// Each case names what failed and with which value; ``description`` reads as
/// one sentence suitable for a log line or a command-line error.
public enum EncoderError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A configuration value is out of range. `parameter` is the ``EncoderConfig``
    /// property ("width", "height", "fps", "bitrateKbps", "keyframeInterval").
    case invalidParameter(parameter: String, value: String, requirement: String)
    /// libx265 could not be loaded, or it was built for a different header.
    case libraryUnavailable(detail: String)
    /// x265 refused one of the options the wrapper sets (`x265_param_parse`).
    case optionRejected(name: String, value: String)
    /// x265 refused the whole parameter set when opening the encoder.
    case openFailed(detail: String)
    /// A frame does not match the configured picture size.
    case frameSizeMismatch(expected: String, actual: String)
    /// `x265_encoder_encode` returned an error code.
    case encodeFailed(code: Int32)
    /// x265 produced a NAL unit without an Annex B start code.
    case malformedOutput(detail: String)
    /// A frame was passed after ``X265Encoder/flush()``; x265 accepts none after a flush.
    case alreadyFlushed

    /// One sentence: what failed, with what, and what to do.
    public var description: String {
        switch self {
        case let .invalidParameter(parameter, value, requirement):
            return "invalid encoder \(parameter) \(value): must be \(requirement)"
        case let .libraryUnavailable(detail):
            return "libx265 unavailable: \(detail) (install libx265-dev 3.5, the version the CX265 shim was built for)"
        case let .optionRejected(name, value):
            return "x265 rejected option \(name)=\(value) (unsupported by this libx265 build?)"
        case let .openFailed(detail):
            return "cannot open x265 encoder: \(detail)"
        case let .frameSizeMismatch(expected, actual):
            return "frame is \(actual) but the encoder was configured for \(expected)"
        case let .encodeFailed(code):
            return "x265_encoder_encode failed with code \(code)"
        case let .malformedOutput(detail):
            return "x265 produced malformed output: \(detail)"
        case .alreadyFlushed:
            return "encoder already flushed: create a new encoder to encode more frames"
        }
    }
}
