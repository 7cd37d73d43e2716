//! `daemon=STAGE` (`load`: the library's constructor, `init`: `cuInit`): a
//! driver that leaves a daemon behind. The calling process forks; the child
//! calls `setsid` (leaving the process group and session the host kills),
//! forks the daemon and exits. The daemon names itself [`DAEMON_NAME`],
//! appends `daemon pid=PID stage=STAGE` to [`DAEMON_LOG_PATH`], tells the
//! caller it is running, and sleeps forever, holding every descriptor the
//! caller had (the probe's copy of stdout too). The caller returns only once
//! the daemon is running and the middle child is reaped, so a test knows
//! exactly which processes were started.

use std::fs::OpenOptions;
use std::io::Write as _;

/// Where each daemon logs its pid.
pub const DAEMON_LOG_PATH: &str = "/usr/local/nvidia/sim/daemons.log";
/// The daemon's `comm` (at most 15 bytes), for a test to look for.
pub const DAEMON_NAME: &std::ffi::CStr = c"rextio-sim-dmn";

pub fn spawn(stage: &str) {
    let mut ready = [0; 2];
    // SAFETY: pipe writes two descriptors into the array it is given.
    if unsafe { libc::pipe(ready.as_mut_ptr()) } != 0 {
        return;
    }
    // SAFETY: the caller is single-threaded (the probe or the smoke, at
    // load or in cuInit), so the child may run ordinary code after fork.
    let middle = unsafe { libc::fork() };
    if middle == 0 {
        // SAFETY: plain process-control calls in the forked child.
        unsafe {
            libc::setsid();
            if libc::fork() == 0 {
                run_daemon(stage, ready[1]);
            }
            libc::_exit(0);
        }
    }
    // SAFETY: closing our copy of the write end, then reading one byte and
    // reaping the middle child: descriptors and a pid this function owns.
    unsafe {
        libc::close(ready[1]);
        if middle > 0 {
            let mut byte = 0u8;
            libc::read(ready[0], (&mut byte as *mut u8).cast(), 1);
            libc::waitpid(middle, std::ptr::null_mut(), 0);
        }
        libc::close(ready[0]);
    }
}

fn run_daemon(stage: &str, ready: libc::c_int) -> ! {
    // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, DAEMON_NAME.as_ptr()) };
    if let Ok(mut log) = OpenOptions::new()
        .create(true)
        .append(true)
        .open(DAEMON_LOG_PATH)
    {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        // One write: lines of daemons that log at once never interleave.
        let _ = log.write_all(format!("daemon pid={pid} stage={stage}\n").as_bytes());
    }
    // SAFETY: one byte from a live local to an open pipe; then sleep forever.
    unsafe {
        libc::write(ready, b"r".as_ptr().cast(), 1);
        loop {
            libc::pause();
        }
    }
}
