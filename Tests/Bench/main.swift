import ArgumentParser
import Dispatch

// Not an async main: the bench runs its bus probe under valgrind, and valgrind 3.19 (Debian
// 12's) crashes when an async main parks the main thread in dispatch_main (in its
// rt_sigsuspend). This main thread waits on a semaphore while the command runs as a task.
enum Entry {
    static func run() {
        let finished = DispatchSemaphore(value: 0)
        Task.detached {
            await BenchCommand.main()
            finished.signal()
        }
        finished.wait()
    }
}

Entry.run()
