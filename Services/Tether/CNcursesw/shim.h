// The terminal through ncursesw (wide characters). Everything Swift needs is here as a small
// function, so that no ncurses macro or global (stdscr) crosses into Swift.
#ifndef TETHER_NCURSESW_SHIM_H
#define TETHER_NCURSESW_SHIM_H

#define NCURSES_WIDECHAR 1
#include <ncursesw/curses.h>
#include <errno.h>
#include <locale.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <wchar.h>

enum {
    TETHER_STYLE_PLAIN = 0,
    TETHER_STYLE_WARNING = 1,
    TETHER_STYLE_ERROR = 2,
    TETHER_STYLE_GOOD = 3,
    TETHER_STYLE_DIM = 4,
    TETHER_STYLE_TITLE = 5,
};

/// The colours of a run of text in a row (a rendered reply), by what it is.
enum {
    TETHER_TONE_PLAIN = 0,
    TETHER_TONE_DIM = 1,
    TETHER_TONE_CODE = 2,
    TETHER_TONE_KEYWORD = 3,
    TETHER_TONE_STRING = 4,
    TETHER_TONE_COMMENT = 5,
    TETHER_TONE_NUMBER = 6,
    TETHER_TONE_LINK = 7,
};

/// A tone's colour pair is this plus the tone.
#define TETHER_TONE_PAIRS 10

/// The attributes of a run of text, added together.
enum {
    TETHER_ATTRIBUTE_BOLD = 1,
    TETHER_ATTRIBUTE_ITALIC = 2,
    TETHER_ATTRIBUTE_UNDERLINE = 4,
    TETHER_ATTRIBUTE_DIM = 8,
};

enum {
    TETHER_KEY_NONE = -1,
    TETHER_KEY_RESIZE = KEY_RESIZE,
    TETHER_KEY_UP = KEY_UP,
    TETHER_KEY_DOWN = KEY_DOWN,
    TETHER_KEY_LEFT = KEY_LEFT,
    TETHER_KEY_RIGHT = KEY_RIGHT,
    TETHER_KEY_HOME = KEY_HOME,
    TETHER_KEY_END = KEY_END,
    TETHER_KEY_PAGE_UP = KEY_PPAGE,
    TETHER_KEY_PAGE_DOWN = KEY_NPAGE,
    TETHER_KEY_BACKSPACE = KEY_BACKSPACE,
    TETHER_KEY_DELETE = KEY_DC,
    TETHER_KEY_ENTER = KEY_ENTER,
    /// The terminal gained the focus (it sends CSI I once focus reporting is on).
    TETHER_KEY_FOCUS_IN = KEY_MAX + 1,
    /// The terminal lost the focus (CSI O).
    TETHER_KEY_FOCUS_OUT = KEY_MAX + 2,
};

/// Asks the terminal to report its focus (CSI ?1004h), or to stop (CSI ?1004l); a terminal
/// that does not know the mode ignores it.
static inline void tether_tui_report_focus(int on) {
    fputs(on ? "\033[?1004h" : "\033[?1004l", stdout);
    fflush(stdout);
}

/// Takes the terminal: UTF-8 from the locale, raw keys (Ctrl-C and Ctrl-Z arrive as keys),
/// no echo, function keys decoded, and a key read that waits at most `wait_ms` (0: never;
/// the caller then waits with `tether_tui_wait`).
static inline void tether_tui_start(int wait_ms) {
    setlocale(LC_ALL, "");
    initscr();
    raw();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    define_key("\033[I", TETHER_KEY_FOCUS_IN);
    define_key("\033[O", TETHER_KEY_FOCUS_OUT);
    tether_tui_report_focus(1);
    set_escdelay(25);
    timeout(wait_ms);
    // The caller reads every key waiting before it draws: ncurses need not look for typed-ahead
    // input (a poll of the terminal, twice a refresh) to cut a refresh short.
    typeahead(-1);
    if (has_colors()) {
        start_color();
        use_default_colors();
        init_pair(TETHER_STYLE_WARNING, COLOR_BLACK, COLOR_YELLOW);
        init_pair(TETHER_STYLE_ERROR, COLOR_WHITE, COLOR_RED);
        init_pair(TETHER_STYLE_GOOD, COLOR_BLACK, COLOR_GREEN);
        init_pair(TETHER_STYLE_DIM, COLOR_CYAN, -1);
        init_pair(TETHER_STYLE_TITLE, COLOR_BLACK, COLOR_WHITE);
        init_pair(TETHER_TONE_PAIRS + TETHER_TONE_CODE, COLOR_YELLOW, -1);
        init_pair(TETHER_TONE_PAIRS + TETHER_TONE_KEYWORD, COLOR_MAGENTA, -1);
        init_pair(TETHER_TONE_PAIRS + TETHER_TONE_STRING, COLOR_GREEN, -1);
        init_pair(TETHER_TONE_PAIRS + TETHER_TONE_COMMENT, COLOR_BLUE, -1);
        init_pair(TETHER_TONE_PAIRS + TETHER_TONE_NUMBER, COLOR_CYAN, -1);
        init_pair(TETHER_TONE_PAIRS + TETHER_TONE_LINK, COLOR_BLUE, -1);
    }
}

/// The descriptor a resize is announced on, and the SIGWINCH handler ncurses installed. Kept
/// in a function's static: a file-scope static of this header is not emitted into Swift's object.
struct tether_tui_resize_state {
    int descriptor;
    struct sigaction ncurses;
};

static inline struct tether_tui_resize_state *tether_tui_resize(void) {
    static struct tether_tui_resize_state state = {.descriptor = -1};
    return &state;
}

static inline void tether_tui_on_resize(int signal) {
    int saved = errno;
    struct tether_tui_resize_state *state = tether_tui_resize();
    // ncurses notes the new size first: its next key read returns KEY_RESIZE.
    if ((state->ncurses.sa_flags & SA_SIGINFO) == 0 && state->ncurses.sa_handler != SIG_DFL && state->ncurses.sa_handler != SIG_IGN) {
        state->ncurses.sa_handler(signal);
    }
    uint64_t one = 1;
    if (state->descriptor >= 0) (void)!write(state->descriptor, &one, sizeof one);
    errno = saved;
}

/// Writes to `descriptor` (an eventfd) on every resize of the terminal, after ncurses has
/// taken note of it: a thread waiting on the descriptor wakes whichever thread the signal
/// reached, and reads the KEY_RESIZE ncurses then returns. Called once, after
/// `tether_tui_start`, which installs ncurses' own handler.
static inline void tether_tui_announce_resizes(int descriptor) {
    struct tether_tui_resize_state *state = tether_tui_resize();
    state->descriptor = descriptor;
    struct sigaction ours = {0};
    ours.sa_handler = tether_tui_on_resize;
    sigemptyset(&ours.sa_mask);
    ours.sa_flags = SA_RESTART;
    sigaction(SIGWINCH, &ours, &state->ncurses);
}

/// A descriptor to wake the terminal's thread with (an eventfd); -1 with errno set when none can be had.
static inline int tether_tui_wake_descriptor(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

/// Wakes a thread waiting in `tether_tui_wait` on `wake`.
static inline void tether_tui_wake(int wake) {
    uint64_t one = 1;
    (void)!write(wake, &one, sizeof one);
}

/// Waits until the terminal has input, `wake` (an eventfd) was written to, or `timeout_ms`
/// passed (-1: no limit), then empties `wake`. A signal ends the wait early.
static inline void tether_tui_wait(int wake, int timeout_ms) {
    struct pollfd descriptors[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = wake, .events = POLLIN}};
    if (poll(descriptors, 2, timeout_ms) > 0 && (descriptors[1].revents & POLLIN)) {
        uint64_t count;
        (void)!read(wake, &count, sizeof count);
    }
}

/// Gives the terminal back as it was.
static inline void tether_tui_stop(void) {
    tether_tui_report_focus(0);
    endwin();
}

/// Takes the terminal again after `tether_tui_stop` (after the process was stopped and continued).
static inline void tether_tui_resume(void) {
    tether_tui_report_focus(1);
    refresh();
}

/// Whether a shell with job control started the process: its parent is in the same session
/// but in another process group, so a stopped job comes back with `fg`. Started by a
/// terminal or tmux directly, nothing could continue a stopped process (the kernel even
/// ignores a stop from the keyboard then).
static inline int tether_tui_can_stop(void) {
    pid_t parent = getppid();
    return getsid(parent) == getsid(0) && getpgid(parent) != getpgrp();
}

/// Stops the process as Ctrl-Z in a cooked terminal would (SIGTSTP, so the shell says
/// "Stopped"); returns once it is continued. ncurses keeps a SIGTSTP handler of its own, so
/// the default action is put back for this one stop. raise() signals this very thread (which
/// may block SIGTSTP, as threads started from a dispatch queue do, so it is let through), so
/// the stop has happened, and ended, before it returns.
static inline void tether_tui_stop_process(void) {
    struct sigaction stop = {0}, previous;
    stop.sa_handler = SIG_DFL;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGTSTP, &stop, &previous);
    sigset_t only_stop, mask;
    sigemptyset(&only_stop);
    sigaddset(&only_stop, SIGTSTP);
    pthread_sigmask(SIG_UNBLOCK, &only_stop, &mask);
    raise(SIGTSTP);
    pthread_sigmask(SIG_SETMASK, &mask, NULL);
    sigaction(SIGTSTP, &previous, NULL);
}

static inline int tether_tui_rows(void) { return getmaxy(stdscr); }
static inline int tether_tui_columns(void) { return getmaxx(stdscr); }

/// Starts writing a row of runs (`tether_tui_span`): the row is cleared.
static inline void tether_tui_row_start(int row) {
    move(row, 0);
    clrtoeol();
}

/// Writes a whole row: UTF-8 text in a style; the rest of the row is cleared.
static inline void tether_tui_row(int row, const char *text, int style) {
    tether_tui_row_start(row);
    if (style != TETHER_STYLE_PLAIN && has_colors()) attron(COLOR_PAIR(style));
    if (style == TETHER_STYLE_TITLE && !has_colors()) attron(A_REVERSE);
    addstr(text);
    if (style != TETHER_STYLE_PLAIN) {
        // A banner fills its row.
        if (style != TETHER_STYLE_DIM) {
            int y, x;
            getyx(stdscr, y, x);
            (void)y;
            for (int column = x; column < getmaxx(stdscr); column++) addch(' ');
        }
        attrset(A_NORMAL);
    }
}

/// Writes a run of UTF-8 text where the last one ended, with attributes (TETHER_ATTRIBUTE_…,
/// added together) in a tone's colour (TETHER_TONE_…; dim without colours).
static inline void tether_tui_span(const char *text, int attributes, int tone) {
    attr_t attribute = A_NORMAL;
    if (attributes & TETHER_ATTRIBUTE_BOLD) attribute |= A_BOLD;
#ifdef A_ITALIC
    if (attributes & TETHER_ATTRIBUTE_ITALIC) attribute |= A_ITALIC;
#endif
    if (attributes & TETHER_ATTRIBUTE_UNDERLINE) attribute |= A_UNDERLINE;
    if ((attributes & TETHER_ATTRIBUTE_DIM) || tone == TETHER_TONE_DIM) attribute |= A_DIM;
    if (tone > TETHER_TONE_DIM && has_colors()) attribute |= COLOR_PAIR(TETHER_TONE_PAIRS + tone);
    attrset(attribute);
    addstr(text);
    attrset(A_NORMAL);
}

/// Makes `text`, already drawn at `row` and `column`, an OSC 8 hyperlink to `url` (printable
/// ASCII): written past ncurses, after `tether_tui_show`, between saving the cursor and its
/// attributes and restoring them, so that ncurses' picture of the screen stays true.
static inline void tether_tui_hyperlink(int row, int column, const char *url, const char *text) {
    printf("\0337\033[%d;%dH\033]8;;%s\033\\\033[4;34m%s\033[0m\033]8;;\033\\\0338", row + 1, column + 1, url, text);
    fflush(stdout);
}

static inline void tether_tui_cursor(int row, int column) { move(row, column); }
static inline void tether_tui_show(void) { refresh(); }

/// The next key, or TETHER_KEY_NONE when none came in time. `*function` is set when it is
/// a function key (TETHER_KEY_…) rather than a character.
static inline int tether_tui_key(int *function) {
    wint_t key;
    int result = get_wch(&key);
    if (result == ERR) return TETHER_KEY_NONE;
    *function = (result == KEY_CODE_YES);
    return (int)key;
}

/// Columns a Unicode scalar takes by the locale's character set (-1: not printable).
/// Declared here: <wchar.h> shows it only with _XOPEN_SOURCE, which would change other headers.
extern int wcwidth(wchar_t);
static inline int tether_tui_scalar_width(unsigned int scalar) { return wcwidth((wchar_t)scalar); }

#endif
