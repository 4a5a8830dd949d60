import NIOCore

extension ConnectionService {
    /// Makes NIO's shared event loop group one loop instead of one for each CPU: connd holds
    /// one connection to the gateway at a time (and a probe or a knock beside it now and
    /// then), which one loop carries; each loop more is an idle thread with its stack and
    /// its epoll. Called once at connd's start, before anything uses the group (NIO stops a
    /// program that sets it twice).
    public static func useOneEventLoop() {
        NIOSingletons.groupLoopCountSuggestion = 1
    }
}
