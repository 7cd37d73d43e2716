//! Scratch directories for verify-determinism and tests.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::Result;

/// A fresh directory under the system temporary directory, removed on drop.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new(purpose: &str) -> Result<Self> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let (pid, unique) = (std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        let path = std::env::temp_dir().join(format!("xtask-{purpose}-{pid}-{unique}"));
        // One left by a dead process with this pid is stale.
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).map_err(crate::paths::at(&path))?;
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
