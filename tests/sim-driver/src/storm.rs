//! `fork_storm=1`: a driver whose constructor starts a thread that keeps
//! forking, for as long as the process lives, children that `setsid`
//! (leaving the process group and session the host kills). Each child names
//! itself [`STORM_NAME`], appends `storm pid=PID` to [`STORM_LOG_PATH`],
//! says so on a pipe and sleeps forever, holding every descriptor the
//! process had. The constructor forks the first child itself and returns
//! once it has logged, so a test knows the storm ran; `cuInit` returns only
//! once the thread has forked [`FORKS_BEFORE_INIT`] more, so the storm is
//! in full swing while the binary works. The thread pauses
//! [`FORK_INTERVAL`] between forks, so a binary that never stops it fills
//! the namespace at a bounded rate, not at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Where each storm child logs its pid.
pub const STORM_LOG_PATH: &core::ffi::CStr = c"/usr/local/nvidia/sim/storm.log";
/// The children's `comm` (at most 15 bytes), for a test to look for.
pub const STORM_NAME: &core::ffi::CStr = c"rextio-sim-frk";
/// The pause between two forks.
const FORK_INTERVAL: Duration = Duration::from_millis(1);
/// How many children the thread forks before `cuInit` returns.
pub const FORKS_BEFORE_INIT: usize = 100;

/// How many children the thread has forked.
static THREAD_FORKS: AtomicUsize = AtomicUsize::new(0);

pub fn start() {
    let mut logged = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(logged.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let [read_end, write_end] = logged;
    // A full pipe never blocks a child: later children's bytes are dropped.
    // SAFETY: fcntl on a descriptor just made; no memory passed.
    unsafe { libc::fcntl(write_end, libc::F_SETFL, libc::O_NONBLOCK) };
    // The first child from the constructor itself, waited for here: the
    // thread cannot run before the dynamic linker has finished loading this
    // library, so waiting for one of its children would never end.
    // SAFETY: fork; the child runs only async-signal-safe calls and never
    // returns.
    if unsafe { libc::fork() } == 0 {
        run_child(write_end);
    }
    let mut byte = 0u8;
    // SAFETY: reads one byte into a live local. The read end stays open for
    // as long as the process lives, so no child's write fails.
    unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
    let _ = std::thread::Builder::new()
        .name("sim-fork-storm".into())
        .spawn(move || loop {
            // SAFETY: fork in a multithreaded process; the child runs only
            // async-signal-safe calls (`run_child`) and never returns.
            match unsafe { libc::fork() } {
                0 => run_child(write_end),
                child if child > 0 => {
                    THREAD_FORKS.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
            std::thread::sleep(FORK_INTERVAL);
        });
}

/// Waits until the thread has forked [`FORKS_BEFORE_INIT`] children (from
/// `cuInit`, once loading is done and the thread runs).
pub fn wait_for_forks() {
    while THREAD_FORKS.load(Ordering::Relaxed) < FORKS_BEFORE_INIT {
        std::thread::sleep(FORK_INTERVAL);
    }
}

/// The child of a fork in a multithreaded process: only async-signal-safe
/// calls, no allocation.
fn run_child(logged: libc::c_int) -> ! {
    const PREFIX: &[u8] = b"storm pid=";
    let mut line = [0u8; 32];
    line[..PREFIX.len()].copy_from_slice(PREFIX);
    // SAFETY: setsid, getpid, prctl(PR_SET_NAME) with a NUL-terminated name
    // of at most 16 bytes, open/write/close of a NUL-terminated path and a
    // stack buffer, and pause: all async-signal-safe.
    unsafe {
        libc::setsid();
        libc::prctl(libc::PR_SET_NAME, STORM_NAME.as_ptr());
        let digits = write_decimal(libc::getpid().unsigned_abs(), &mut line[PREFIX.len()..]);
        let length = PREFIX.len() + digits;
        line[length] = b'\n';
        let log = libc::open(
            STORM_LOG_PATH.as_ptr(),
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC,
            0o644,
        );
        if log >= 0 {
            // One write of the whole line: O_APPEND keeps lines whole.
            libc::write(log, line.as_ptr().cast(), length + 1);
            libc::close(log);
        }
        libc::write(logged, b"l".as_ptr().cast(), 1);
        loop {
            libc::pause();
        }
    }
}

/// Writes `value` in decimal at the start of `buffer`; returns how many
/// digits it wrote (at most 10).
fn write_decimal(mut value: u32, buffer: &mut [u8]) -> usize {
    let mut reversed = [0u8; 10];
    let mut count = 0;
    loop {
        reversed[count] = b'0' + (value % 10) as u8;
        count += 1;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    for index in 0..count {
        buffer[index] = reversed[count - 1 - index];
    }
    count
}
