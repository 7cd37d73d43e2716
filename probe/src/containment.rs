//! What the driver spawns ends with the binary that loaded it (contract §9.3).
//!
//! A driver library may fork from its constructor or from any call, and a
//! child may `setsid` and fork again to leave the process group the host
//! kills. So the probe and the smoke make themselves a child subreaper
//! before anything loads: every orphaned descendant is re-parented to them,
//! not to init. Before they print their record they kill and reap every
//! child, layer by layer (a killed child's own children become theirs),
//! until none is left. With no child left no descendant can remain: any
//! living descendant's chain of parents would end in a child.
//!
//! A child's pid cannot be reused while it is unreaped, but another thread
//! (the driver's) could reap it; so each child is opened as a pidfd first,
//! confirmed to be a child through that pidfd's pid, and only the pidfd is
//! signalled and waited for.
//!
//! Off Linux nothing here does anything: Windows loads only System32's
//! `nvcuda.dll`, and the host ends the probe process there.

/// Makes this process a child subreaper. Call first thing in `main`.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    linux::become_subreaper();
}

/// Kills and reaps every descendant; returns once this process has no child.
pub fn end_descendants() {
    #[cfg(target_os = "linux")]
    linux::end_descendants();
}

#[cfg(target_os = "linux")]
mod linux {
    use std::fs;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    pub(super) fn become_subreaper() {
        // SAFETY: prctl with integer arguments only. If the kernel refuses
        // (before 3.4), orphans go to init as they always did.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    }

    pub(super) fn end_descendants() {
        let own = std::process::id();
        loop {
            let mut ended = false;
            for pid in children(own) {
                ended |= end_child(own, pid);
            }
            // No child left (or none that can be ended: never spin).
            if !ended {
                return;
            }
        }
    }

    /// Kills and reaps one child through a pidfd; false if it was no child.
    fn end_child(own: u32, pid: u32) -> bool {
        let pidfd = pidfd_open(pid);
        // The pidfd names whatever holds `pid` now; act only if that is our child.
        if parent_of(pid) != Some(own) {
            return false;
        }
        let Ok(pidfd) = pidfd else {
            // A kernel before 5.3 (no pidfd_open): our unreaped child's pid
            // cannot have been reused, so the pid itself is safe here.
            // SAFETY: kill and waitpid on a child's pid; no memory passed.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
                while libc::waitpid(pid as libc::pid_t, std::ptr::null_mut(), 0) < 0
                    && interrupted()
                {}
            }
            return true;
        };
        // SAFETY: raw syscalls on a pidfd this function owns; a null siginfo
        // is allowed by pidfd_send_signal.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
        loop {
            // SAFETY: waitid writes only into `info`, a zeroed siginfo_t owned here.
            let reaped = unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                libc::waitid(
                    libc::P_PIDFD,
                    pidfd.as_raw_fd() as libc::id_t,
                    &mut info,
                    libc::WEXITED,
                )
            };
            // ECHILD: another thread reaped it first; it ended all the same.
            if reaped == 0 || !interrupted() {
                return true;
            }
        }
    }

    fn interrupted() -> bool {
        std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    }

    /// A pidfd for `pid`; Err(()) when the kernel has no pidfd_open.
    fn pidfd_open(pid: u32) -> Result<OwnedFd, ()> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        match i32::try_from(fd) {
            // SAFETY: the kernel just returned this descriptor; nothing else owns it.
            Ok(fd) if fd >= 0 => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
            _ => Err(()),
        }
    }

    /// This process's children (every thread's), from /proc.
    fn children(own: u32) -> Vec<u32> {
        let mut found = Vec::new();
        let Ok(tasks) = fs::read_dir("/proc/self/task") else {
            return scan_children(own);
        };
        for task in tasks.flatten() {
            match fs::read_to_string(task.path().join("children")) {
                Ok(text) => found.extend(
                    text.split_whitespace()
                        .filter_map(|p| p.parse::<u32>().ok()),
                ),
                // A kernel without CONFIG_PROC_CHILDREN: look at every process.
                Err(_) if task.path().exists() => return scan_children(own),
                Err(_) => {} // the thread exited meanwhile
            }
        }
        found
    }

    fn scan_children(own: u32) -> Vec<u32> {
        let Ok(entries) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| parent_of(*pid) == Some(own))
            .collect()
    }

    fn parent_of(pid: u32) -> Option<u32> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // After the command name (which may hold anything, even ")"): state, ppid.
        let (_, rest) = stat.rsplit_once(')')?;
        rest.split_whitespace().nth(1)?.parse().ok()
    }
}
