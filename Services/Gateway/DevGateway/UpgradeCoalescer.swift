import NIOCore

/// Holds back the `101 Switching Protocols` response until the first frames written after it,
/// then writes them all at once, so that a client reads its first frames in the same read as
/// the response: what a real gateway's `connect.challenge` often does, and what a client must
/// cope with (the bytes after the response belong to the WebSocket).
///
/// Installed nearest the socket before the upgrade; it counts flushes: the response's, then
/// one for each of `frames` frames, and lets everything out at the last of them (or after
/// `patience`, whichever is first), then leaves the pipeline.
final class UpgradeCoalescer: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    private let frames: Int
    private let patience: TimeAmount
    private var held: [IOData] = []
    private var flushes = 0
    private var released = false
    private var fallback: Scheduled<Void>?

    init(frames: Int, patience: TimeAmount = .milliseconds(500)) {
        self.frames = max(1, frames)
        self.patience = patience
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loop = context.eventLoop.assumeIsolated()
        fallback = loop.scheduleTask(in: patience) { [self] in release(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        fallback?.cancel()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard !released else { return context.write(data, promise: promise) }
        // Taken: the upgrade waits for the response's write before it installs the WebSocket,
        // and the frames are written after that.
        held.append(unwrapOutboundIn(data))
        promise?.succeed(())
    }

    func flush(context: ChannelHandlerContext) {
        guard !released else { return context.flush() }
        flushes += 1
        if flushes > frames { release(context: context) }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        release(context: context)
        context.close(mode: mode, promise: promise)
    }

    private func release(context: ChannelHandlerContext) {
        guard !released else { return }
        released = true
        fallback?.cancel()
        for data in held { context.write(wrapOutboundOut(data), promise: nil) }
        held.removeAll()
        context.flush()
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }
}
