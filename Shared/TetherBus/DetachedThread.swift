import CLinux

#if canImport(Glibc)
import Glibc
#endif

/// Starts a thread of its own that runs `body` once and ends: for a blocking loop that owns
/// something not thread-safe (a ZeroMQ socket) or waits on a descriptor, so nothing else
/// wakes for it. A POSIX thread, so that a program needs no more than FoundationEssentials.
///
/// - Parameters:
///   - name: the thread's name as `ps -T` and `/proc/PID/task/TID/comm` show it (the kernel keeps 15 bytes).
public func startDetachedThread(name: String, _ body: @escaping @Sendable () -> Void) {
    let context = Unmanaged.passRetained(ThreadBody(name: name, run: body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let result = pthread_create(
        &thread, &attributes,
        { context in
            let body = Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue()
            _ = tether_name_this_thread(body.name)
            body.run()
            return nil
        }, context)
    // Out of threads or memory: nothing in a program can go on sensibly without its loop.
    precondition(result == 0, "cannot start the thread \(name): \(String(cString: strerror(result)))")
}

private final class ThreadBody: Sendable {
    let name: String
    let run: @Sendable () -> Void

    init(name: String, run: @escaping @Sendable () -> Void) {
        self.name = name
        self.run = run
    }
}
