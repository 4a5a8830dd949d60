/// An error that starting the program again cannot get past (a setting that is wrong, a
/// store a newer version wrote): the program ends with its words and exit status 78, which a
/// compose supervisor shows at once instead of restarting it with backoff
/// (`ConfigurationProblem.guarding` in TetherService).
public protocol UnfixableByRestart: Error, CustomStringConvertible {}
