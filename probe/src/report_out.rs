//! The report's own copy of stdout (docs/interfaces.md, The loader seam).
//!
//! A driver library may print from its constructor or from any call; the
//! JSON report must stay the only thing on the reader's stdout. So before
//! any driver is loaded, the binaries keep a duplicate of stdout for the
//! report and point descriptor 1 at stderr: whatever the driver prints goes
//! to stderr, which the provider discards.

use std::io::{self, Write};

/// Where the one JSON line goes.
pub struct ReportOut {
    #[cfg(unix)]
    file: Option<std::fs::File>,
}

impl ReportOut {
    /// Keeps a duplicate of stdout for the report and points descriptor 1
    /// at stderr. Call before the driver is loaded. If stdout is closed
    /// there is nothing to keep, and the report is lost as it would be
    /// anyway; descriptor 1 is still pointed at stderr.
    #[cfg(unix)]
    pub fn divert_stdout() -> Self {
        // SAFETY: F_DUPFD_CLOEXEC duplicates descriptor 1 if it is open; no
        // memory is passed.
        let kept = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_DUPFD_CLOEXEC, 3) };
        // SAFETY: dup2 on two descriptor numbers, no memory passed. Rust's
        // runtime opens /dev/null on any of descriptors 0-2 that were closed
        // at start, so stderr is open here.
        unsafe { libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) };
        let file = (kept >= 0).then(|| {
            use std::os::fd::FromRawFd;
            // SAFETY: fcntl just returned this descriptor, owned by nobody else.
            unsafe { std::fs::File::from_raw_fd(kept) }
        });
        Self { file }
    }

    /// Off Unix the driver is `nvcuda.dll`, loaded from System32 only; the
    /// report goes to stdout.
    #[cfg(not(unix))]
    pub fn divert_stdout() -> Self {
        Self {}
    }

    /// Closes the report's copy of stdout, in a process that never writes
    /// the report (the driver worker): nothing it starts keeps a copy.
    pub fn close(&mut self) {
        #[cfg(unix)]
        {
            self.file = None;
        }
    }

    /// Writes one line (the report) and flushes it.
    pub fn write_line(&mut self, line: &str) -> io::Result<()> {
        #[cfg(unix)]
        {
            let file = self
                .file
                .as_mut()
                .ok_or_else(|| io::Error::from(io::ErrorKind::BrokenPipe))?;
            file.write_all(format!("{line}\n").as_bytes())?;
            file.flush()
        }
        #[cfg(not(unix))]
        {
            let mut stdout = io::stdout().lock();
            writeln!(stdout, "{line}")?;
            stdout.flush()
        }
    }
}
