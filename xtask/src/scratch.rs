//! Scratch directories for verify-determinism and tests.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Result;

/// A fresh directory under the system temporary directory, removed on drop.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new(purpose: &str) -> Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let unique = COUNTER.fetch_add(1, Ordering::Relaxed);
        let since_epoch = std::time::UNIX_EPOCH.elapsed().unwrap_or_default();
        let (pid, nanos) = (std::process::id(), since_epoch.subsec_nanos());
        let path = std::env::temp_dir().join(format!("xtask-{purpose}-{pid}-{unique}-{nanos}"));
        std::fs::create_dir_all(&path)
            .map_err(|error| format!("{}: cannot create: {error}", path.display()))?;
        Ok(Self(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
