import CLinux

/// What a Tether program does to keep its heap small while it waits.
///
/// glibc's malloc gives each thread that allocates an arena of its own (up to eight for each
/// CPU), and an arena keeps what was freed in it for reuse rather than giving it back to the
/// system. A Tether program runs half a dozen threads that allocate (libzmq's, the bus
/// client's, Swift concurrency's, NIO's, GRDB's), so what a burst of traffic allocated stays
/// resident, spread over as many arenas, long after the program went idle.
public enum ProcessMemory {
    /// Arenas a process may have: the main one and one for its threads.
    ///
    /// Each thread keeps a small cache of freed blocks of its own, which takes most
    /// allocations without the arena's lock, so two arenas are enough for a program's
    /// threads, that seldom allocate at the same time.
    public static let arenaLimit: Int32 = 2

    /// Limits malloc to ``arenaLimit`` arenas. Called first thing at a program's start,
    /// before the threads it starts allocate: a thread already given an arena keeps it.
    public static func limitArenas() {
        _ = mallopt(M_ARENA_MAX, arenaLimit)
    }

    /// Gives the pages of freed heap memory back to the system, in every arena
    /// (`malloc_trim`): memory that a program's next allocations would take from the system
    /// again, cheaply, and that would otherwise count as the idle program's own.
    public static func returnFreedPages() {
        _ = malloc_trim(0)
    }
}
