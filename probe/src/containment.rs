//! What the driver spawns ends with the binary that loaded it (docs/interfaces.md, Probe runner).
//!
//! A driver library may fork from its constructor, from any call or from a
//! thread of its own that keeps forking, and a child may `setsid` and fork
//! again to leave the process group and session the host kills. So the
//! probe and the smoke:
//!
//! 1. first thing, bind themselves to their parent: the parent's death
//!    sends them SIGTERM (`PR_SET_PDEATHSIG`), checked against the race of
//!    a parent that died just before; SIGTERM, from there or anyone, makes
//!    them stop the worker, sweep (5.) and end by SIGTERM;
//! 2. make themselves a child subreaper before anything loads: every
//!    orphaned descendant is re-parented to them, not to init;
//! 3. run the driver work in a child process, the *worker*, which writes the
//!    one record line into a pipe and exits. The driver is loaded only in
//!    the worker, so its threads live only there; it dies with the binary
//!    (`PR_SET_PDEATHSIG`, SIGKILL);
//! 4. once the line is read, give the worker [`WORKER_EXIT_GRACE`] to exit
//!    by itself (a driver that crashes at exit still makes the binary exit
//!    as it did), then kill it: no driver thread is left that could fork.
//!    A worker without its line by [`WORKER_DEADLINE`] is killed then (and
//!    the grace ends there too): the binary bounds itself even when no host
//!    is left to kill it;
//! 5. sweep: kill every descendant, found by its chain of parents in
//!    `/proc`, and reap every child, round after round, until none is left
//!    or [`SWEEP_DEADLINE`] has passed. A killed process forks no more, and
//!    with the driver stopped nothing else starts them, so the rounds end.
//!    If a descendant still lives at the deadline the sweep says so, and the
//!    binary's record is a failure (fail closed).
//!
//! A descendant's pid could be reused between reading `/proc` and the
//! signal, so each one is opened as a pidfd first, confirmed through its
//! parent to still be a descendant, and only the pidfd is signalled.
//!
//! So whatever ends the host (SIGTERM, `timeout`, SIGKILL, the OOM killer),
//! the binary and its worker end within [`WORKER_DEADLINE`] +
//! [`SWEEP_DEADLINE`] of the worker's start, and at once (within
//! [`SWEEP_DEADLINE`]) when the parent-death signal arrives. A parent that
//! died before the binary's first instruction is not seen (its new parent
//! is init or a subreaper): the deadline bounds that case.
//!
//! Off Linux the work runs in the binary itself: Windows loads only
//! System32's `nvcuda.dll`, and the host ends the probe process there.

use std::process::ExitCode;
use std::time::Duration;

use crate::generated::spec::{RUNNER_MAX_TIMEOUT_SECONDS, RUNNER_SWEEP_SECONDS};
#[cfg(target_os = "linux")]
use std::time::Instant;

/// How long the worker may take to exit once its record is read, before it
/// is killed.
pub const WORKER_EXIT_GRACE: Duration = Duration::from_secs(2);
/// How long the sweep may go on once the worker has ended (the runner
/// waits this long after its SIGTERM before it kills the session).
pub const SWEEP_DEADLINE: Duration = Duration::from_secs(RUNNER_SWEEP_SECONDS);
/// How long the worker may run at all, from its start: the runner's
/// largest timeout, so a host still waiting for the record is never cut
/// short, and nothing of the binary outlives a host that died.
pub const WORKER_DEADLINE: Duration = Duration::from_secs(RUNNER_MAX_TIMEOUT_SECONDS);

/// What the worker's work produced: the record line (without its newline)
/// and the exit status the binary gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRecord {
    pub line: String,
    pub exit_status: u8,
}

/// How the worker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerEnd {
    /// It exited by itself with this status.
    Exited(i32),
    /// A signal ended it (the driver crashed it).
    Signaled(i32),
    /// It did not exit within [`WORKER_EXIT_GRACE`] or by
    /// [`WORKER_DEADLINE`] and was killed (or could not be started).
    Stopped,
}

/// The outcome of [`run_contained`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contained {
    /// The record line the worker wrote, if it wrote a whole one.
    pub line: Option<String>,
    pub worker_end: WorkerEnd,
    /// Whether some descendant still lived when the sweep's deadline passed.
    pub survivors: bool,
}

/// Binds this process to its parent and makes it a child subreaper (steps
/// 1 and 2 of the module documentation): call first thing in `main`, before
/// anything can fork. Ends this process by SIGTERM if the parent is already
/// gone.
pub fn start() {
    #[cfg(target_os = "linux")]
    linux::end_with_parent();
    become_subreaper();
}

/// Makes this process a child subreaper (step 2 alone).
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    linux::become_subreaper();
}

/// Runs `work` in the worker (see the module documentation), then stops the
/// worker and sweeps every descendant. Call while this process has one
/// thread and no driver is loaded. `work` runs only in the worker.
pub fn run_contained(work: impl FnOnce() -> WorkerRecord) -> Contained {
    #[cfg(target_os = "linux")]
    {
        linux::run_contained(work)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let record = work();
        Contained {
            line: Some(record.line),
            worker_end: WorkerEnd::Exited(i32::from(record.exit_status)),
            survivors: false,
        }
    }
}

impl WorkerEnd {
    /// The binary's exit status for a worker that ended so: the worker's
    /// own status, or `stopped` for a worker that was stopped. A signal that
    /// ended the worker ends this process too (its default action), so the
    /// host sees a driver that crashes as it always did; `stopped` only if
    /// that signal does not end a process.
    pub fn exit_code(self, stopped: u8) -> ExitCode {
        match self {
            Self::Exited(status) => ExitCode::from(u8::try_from(status).unwrap_or(stopped)),
            Self::Signaled(signal) => {
                die_by_signal(signal);
                ExitCode::from(stopped)
            }
            Self::Stopped => ExitCode::from(stopped),
        }
    }
}

/// Sends `signal` to this process with its default action.
fn die_by_signal(signal: i32) {
    #[cfg(unix)]
    // SAFETY: resetting one signal's disposition and sending it to this
    // process; no memory is passed.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::kill(libc::getpid(), signal);
    }
    #[cfg(not(unix))]
    let _ = signal;
}

#[cfg(target_os = "linux")]
pub use linux::sweep;

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::{BTreeMap, BTreeSet};
    use std::fs;
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::{die_by_signal, Contained, Duration, Instant, WorkerEnd, WorkerRecord};
    use super::{SWEEP_DEADLINE, WORKER_DEADLINE, WORKER_EXIT_GRACE};

    /// The most the worker's record line may hold; more is no record.
    const MAX_RECORD_BYTES: usize = 1 << 20;
    /// How often the waits below look again.
    const POLL_INTERVAL: Duration = Duration::from_millis(1);
    /// How long one wait for the worker's output lasts before the worker is
    /// checked for having exited without writing.
    const READ_POLL_MILLISECONDS: libc::c_int = 10;

    /// Set by SIGTERM (the parent-death signal, or anyone's): stop the
    /// worker, sweep, and end by SIGTERM.
    static STOP_REQUESTED: AtomicBool = AtomicBool::new(false);

    extern "C" fn request_stop(_signal: libc::c_int) {
        STOP_REQUESTED.store(true, Ordering::SeqCst);
    }

    fn stop_requested() -> bool {
        STOP_REQUESTED.load(Ordering::SeqCst)
    }

    pub(super) fn end_with_parent() {
        // SAFETY: getppid has no preconditions.
        let parent = unsafe { libc::getppid() };
        // SAFETY: installs a handler that only stores to an atomic (async-
        // signal-safe), from a zeroed sigaction with an empty mask, and
        // unblocks SIGTERM (a mask is inherited through exec); only local
        // structures are passed. No SA_RESTART: a wait in progress returns
        // early and looks at the flag.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = request_stop as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
            let mut terminate: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut terminate);
            libc::sigaddset(&mut terminate, libc::SIGTERM);
            libc::sigprocmask(libc::SIG_UNBLOCK, &terminate, std::ptr::null_mut());
        }
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) };
        // The parent may have died before the signal was set: then this
        // process was already re-parented and nothing will signal it.
        // SAFETY: getppid has no preconditions.
        if unsafe { libc::getppid() } != parent {
            die_by_signal(libc::SIGTERM);
        }
    }

    pub(super) fn become_subreaper() {
        // SAFETY: prctl with integer arguments only. If the kernel refuses
        // (before 3.4), orphans go to init as they always did.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    }

    pub(super) fn run_contained(work: impl FnOnce() -> WorkerRecord) -> Contained {
        let Some((read_end, write_end)) = pipe() else {
            return not_started("cannot make the worker's pipe");
        };
        let binary = std::process::id();
        let worker_deadline = Instant::now() + WORKER_DEADLINE;
        // SAFETY: this process has one thread (the caller's contract), so
        // the child may run ordinary code after fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return not_started("cannot start the driver worker");
        }
        if pid == 0 {
            drop(read_end);
            run_worker(write_end, binary, work);
        }
        drop(write_end);
        let mut worker = Worker {
            pid,
            end: None,
            killed: false,
        };
        let line = read_record(&read_end, &mut worker, worker_deadline);
        // The record is in; the worker's copies of the pipe may live on in
        // whatever the driver started, which the sweep ends.
        drop(read_end);
        let grace = (Instant::now() + WORKER_EXIT_GRACE).min(worker_deadline);
        worker.wait_until(grace, true);
        let deadline = Instant::now() + SWEEP_DEADLINE;
        if worker.end.is_none() {
            if line.is_none() && !stop_requested() {
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "the driver worker wrote no record within {} s and was stopped",
                    WORKER_DEADLINE.as_secs()
                );
            }
            worker.kill();
            worker.wait_until(deadline, false);
        }
        // The worker is a descendant too: if it still lives, the sweep says so.
        let clean = sweep(deadline);
        if stop_requested() {
            // Nothing waits for the record now (the parent is gone, or
            // someone asked this process to end): end as asked.
            die_by_signal(libc::SIGTERM);
        }
        let worker_end = match worker.end {
            Some(end) if !worker.killed => end,
            _ => WorkerEnd::Stopped,
        };
        Contained {
            line,
            worker_end,
            survivors: !clean,
        }
    }

    fn not_started(why: &str) -> Contained {
        let error = std::io::Error::last_os_error();
        let _ = writeln!(std::io::stderr().lock(), "{why}: {error}");
        Contained {
            line: None,
            worker_end: WorkerEnd::Stopped,
            survivors: false,
        }
    }

    /// The worker: dies with the binary (so a host that kills only the
    /// binary stops the driver too; checked against a binary that died
    /// before the signal was set), runs `work`, writes its line and exits
    /// through `exit`, so the driver's exit handlers run as they would have
    /// in the binary. SIGTERM has its default action here, as it had before
    /// the binary installed its own.
    fn run_worker(write_end: OwnedFd, binary: u32, work: impl FnOnce() -> WorkerRecord) -> ! {
        // SAFETY: prctl with integer arguments, then resetting one signal's
        // disposition; no memory is passed.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
        }
        // SAFETY: getppid has no preconditions.
        let parent = unsafe { libc::getppid() };
        if u32::try_from(parent).ok() != Some(binary) {
            // The binary died before the signal was set: nothing waits.
            // SAFETY: _exit ends only this process and runs no handler.
            unsafe { libc::_exit(1) };
        }
        let record = work();
        let mut pipe = fs::File::from(write_end);
        let _ = pipe.write_all(format!("{}\n", record.line).as_bytes());
        drop(pipe);
        std::process::exit(i32::from(record.exit_status))
    }

    /// The binary's one child it waits for by pid: unreaped, its pid cannot
    /// be reused, and this process has no other thread that could reap it.
    struct Worker {
        pid: libc::pid_t,
        /// How it ended, once reaped.
        end: Option<WorkerEnd>,
        /// Whether this process killed it.
        killed: bool,
    }

    impl Worker {
        /// Reaps the worker if it has ended.
        fn check(&mut self) {
            if self.end.is_some() {
                return;
            }
            let mut status = 0;
            // SAFETY: waitpid on this process's own unreaped child, writing
            // only into a local.
            let reaped = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) };
            if reaped == self.pid {
                self.end = Some(if libc::WIFSIGNALED(status) {
                    WorkerEnd::Signaled(libc::WTERMSIG(status))
                } else {
                    WorkerEnd::Exited(libc::WEXITSTATUS(status))
                });
            }
        }

        /// Waits for the worker to end, at most until `deadline`, and when
        /// `until_stop`, no longer than until a stop is requested.
        fn wait_until(&mut self, deadline: Instant, until_stop: bool) {
            loop {
                self.check();
                let stop = until_stop && stop_requested();
                if self.end.is_some() || stop || Instant::now() >= deadline {
                    return;
                }
                std::thread::sleep(POLL_INTERVAL);
            }
        }

        /// Kills the worker and with it every driver thread.
        fn kill(&mut self) {
            // SAFETY: SIGKILL to this process's own unreaped child.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            self.killed = true;
        }
    }

    /// Reads the worker's record line: up to its newline, until the pipe
    /// closes, or until the worker has ended without a whole line (the
    /// driver may have left the pipe open in processes of its own). None
    /// once `deadline` has passed or a stop is requested.
    fn read_record(read_end: &OwnedFd, worker: &mut Worker, deadline: Instant) -> Option<String> {
        let mut bytes = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(newline) = bytes.iter().position(|byte| *byte == b'\n') {
                bytes.truncate(newline);
                return String::from_utf8(bytes).ok();
            }
            if bytes.len() > MAX_RECORD_BYTES || stop_requested() || Instant::now() >= deadline {
                return None;
            }
            let mut poll = libc::pollfd {
                fd: read_end.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one live pollfd, its count, and a timeout.
            let ready = unsafe { libc::poll(&mut poll, 1, READ_POLL_MILLISECONDS) };
            if ready == 0 {
                worker.check();
                if worker.end.is_some() && !readable_now(read_end) {
                    return None;
                }
                continue;
            }
            if ready < 0 {
                if interrupted() {
                    continue;
                }
                return None;
            }
            // SAFETY: reads into a live local buffer of the given length.
            let count =
                unsafe { libc::read(read_end.as_raw_fd(), chunk.as_mut_ptr().cast(), chunk.len()) };
            match usize::try_from(count) {
                Ok(0) => return None,
                Ok(count) => bytes.extend_from_slice(&chunk[..count]),
                Err(_) if interrupted() => {}
                Err(_) => return None,
            }
        }
    }

    /// Whether the pipe has something to read right now.
    fn readable_now(read_end: &OwnedFd) -> bool {
        let mut poll = libc::pollfd {
            fd: read_end.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd, its count, and no wait.
        unsafe { libc::poll(&mut poll, 1, 0) == 1 }
    }

    /// Kills every descendant of this process and reaps every child, round
    /// after round, until none is left or `deadline` has passed. True when
    /// none is left alive (a zombie whose parent has not yet ended is dead
    /// and runs nothing). Checks `deadline` before every kill, so it never
    /// runs past it by more than one process's handling.
    pub fn sweep(deadline: Instant) -> bool {
        let own = std::process::id();
        loop {
            reap_children();
            let table = ProcessTable::read();
            let descendants = table.descendants_of(own);
            if descendants.is_empty() {
                return true;
            }
            if Instant::now() >= deadline {
                return !descendants.iter().any(|pid| table.is_alive(*pid));
            }
            // Zombies too: a zombie leader may still have running threads.
            for pid in &descendants {
                if Instant::now() >= deadline {
                    break;
                }
                kill_descendant(*pid, own, &descendants);
            }
            reap_children();
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Reaps every child that has ended, without waiting.
    fn reap_children() {
        loop {
            // SAFETY: waitpid for any child, without waiting, no status kept.
            let reaped = unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) };
            if reaped <= 0 && !(reaped < 0 && interrupted()) {
                return;
            }
        }
    }

    /// Sends SIGKILL to `pid` through a pidfd, once the pidfd's process is
    /// confirmed to still be a descendant: its parent is this process or
    /// another descendant (a reused pid's new process has neither).
    fn kill_descendant(pid: u32, own: u32, descendants: &BTreeSet<u32>) {
        let pidfd = pidfd_open(pid);
        let is_descendant = |parent: u32| parent == own || descendants.contains(&parent);
        if !parent_of(pid).is_some_and(is_descendant) {
            return;
        }
        match pidfd {
            // SAFETY: a raw syscall on a pidfd this function owns; a null
            // siginfo is allowed by pidfd_send_signal.
            Ok(pidfd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    pidfd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            },
            // A kernel before 5.3 (no pidfd_open): the parent was checked
            // just now, which leaves only that instant for a reuse.
            // SAFETY: kill with a pid and a signal; no memory passed.
            Err(()) => unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            },
        }
    }

    /// Every process's parent and state, from one pass over `/proc`.
    struct ProcessTable {
        /// pid -> (parent pid, state letter).
        processes: BTreeMap<u32, (u32, char)>,
    }

    impl ProcessTable {
        fn read() -> Self {
            let mut processes = BTreeMap::new();
            if let Ok(entries) = fs::read_dir("/proc") {
                for entry in entries.flatten() {
                    let Some(pid) = entry
                        .file_name()
                        .to_str()
                        .and_then(|name| name.parse().ok())
                    else {
                        continue;
                    };
                    if let Some(parent_and_state) = stat_of(pid) {
                        processes.insert(pid, parent_and_state);
                    }
                }
            }
            Self { processes }
        }

        /// Every process whose chain of parents reaches `ancestor`.
        fn descendants_of(&self, ancestor: u32) -> BTreeSet<u32> {
            let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            for (pid, (parent, _)) in &self.processes {
                children.entry(*parent).or_default().push(*pid);
            }
            let mut found = BTreeSet::new();
            let mut pending = vec![ancestor];
            while let Some(parent) = pending.pop() {
                for child in children.get(&parent).into_iter().flatten() {
                    if found.insert(*child) {
                        pending.push(*child);
                    }
                }
            }
            found
        }

        /// Not a zombie (`Z`) nor dead (`X`, `x`), or a zombie leader whose
        /// other threads still run.
        fn is_alive(&self, pid: u32) -> bool {
            self.processes.get(&pid).is_some_and(|(_, state)| {
                !is_dead(*state) || (*state == 'Z' && has_live_thread(pid))
            })
        }
    }

    fn is_dead(state: char) -> bool {
        matches!(state, 'Z' | 'X' | 'x')
    }

    /// Whether a task of `pid`'s thread group (`/proc/PID/task`) is alive.
    fn has_live_thread(pid: u32) -> bool {
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            return false;
        };
        tasks.flatten().any(|task| {
            fs::read_to_string(task.path().join("stat"))
                .ok()
                .and_then(|stat| state_of(&stat))
                .is_some_and(|state| !is_dead(state))
        })
    }

    fn parent_of(pid: u32) -> Option<u32> {
        stat_of(pid).map(|(parent, _)| parent)
    }

    /// The parent pid and state letter of `/proc/PID/stat`.
    fn stat_of(pid: u32) -> Option<(u32, char)> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command name (which may hold anything, even ")"): state, ppid.
        let (_, rest) = stat.rsplit_once(')')?;
        let mut fields = rest.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let parent = fields.next()?.parse().ok()?;
        Some((parent, state))
    }

    /// The state letter of a `stat` file's text.
    fn state_of(stat: &str) -> Option<char> {
        let (_, rest) = stat.rsplit_once(')')?;
        rest.split_whitespace().next()?.chars().next()
    }

    fn interrupted() -> bool {
        std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    }

    /// A close-on-exec pipe: (read end, write end).
    fn pipe() -> Option<(OwnedFd, OwnedFd)> {
        let mut ends = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array it is given.
        if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        // SAFETY: pipe2 just returned these descriptors, owned by nobody else.
        Some(unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) })
    }

    /// A pidfd for `pid`; Err(()) when the kernel has no pidfd_open (or the
    /// process is gone).
    fn pidfd_open(pid: u32) -> Result<OwnedFd, ()> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        match i32::try_from(fd) {
            // SAFETY: the kernel just returned this descriptor; nothing else owns it.
            Ok(fd) if fd >= 0 => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            _ => Err(()),
        }
    }
}
