/// The version `streamer --version` prints and every stats JSON carries (`version`): the one
/// place it is written. Raise it with each release.
let streamerVersion = "0.17.0"

/// The commit the release was cut from, written by hand with the version (nothing is generated
/// at build time, so a clean clone without git builds the same); nil prints `unknown`.
let streamerGitCommit: String? = nil

/// The line `streamer --version` and `streamer version` print.
var versionLine: String { "streamer \(streamerVersion) (git \(streamerGitCommit ?? "unknown"))" }
