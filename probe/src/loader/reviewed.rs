//! Which driver image may be opened: the reviewed candidate paths and roots,
//! and the acceptance rule every candidate must pass (contract §6).
//!
//! The rule takes its inputs as parameters so tests can exercise it on
//! temporary directories; production uses the consts below.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The driver image's file name in every Linux candidate directory.
pub const LINUX_DRIVER_FILE_NAME: &str = "libcuda.so.1";

/// Candidate directories on Linux x86_64, tried in this order.
pub const LINUX_X86_64_CANDIDATE_DIRS: &[&str] = &[
    "/usr/lib/wsl/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
];

/// Candidate directories on Linux AArch64, tried in this order.
pub const LINUX_AARCH64_CANDIDATE_DIRS: &[&str] = &[
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/aarch64-linux-gnu/tegra",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
];

/// A candidate's canonical path must lie strictly below one of these.
pub const REVIEWED_ROOTS: &[&str] = &[
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/nvidia/lib",
    "/usr/local/nvidia/lib64",
];

/// Every directory from this one down to the image must be writable only by
/// its owner.
pub const ANCESTOR_CHECK_FLOOR: &str = "/usr";

/// Group and other write permission bits.
const GROUP_OR_OTHER_WRITE: u32 = 0o022;

/// The candidate paths for a list of candidate directories, in order.
pub fn candidate_paths(dirs: &[&str]) -> Vec<PathBuf> {
    dirs.iter()
        .map(|dir| Path::new(dir).join(LINUX_DRIVER_FILE_NAME))
        .collect()
}

/// The reviewed roots as paths.
pub fn reviewed_roots() -> Vec<PathBuf> {
    REVIEWED_ROOTS.iter().map(PathBuf::from).collect()
}

/// Why an existing candidate was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    /// The path could not be canonicalized (dangling link, loop, no access).
    Unresolvable,
    /// The canonical path is not strictly below a reviewed root or the floor.
    OutsideReviewedRoots,
    /// The canonical path is not a regular file.
    NotRegularFile,
    /// The image itself has a group or other write bit.
    ImageWritableByOthers,
    /// An ancestor directory could not be inspected.
    AncestorUnreadable,
    /// An ancestor is not a directory (cannot happen for a canonical path,
    /// but checked rather than assumed).
    AncestorNotDirectory,
    /// An ancestor directory has a group or other write bit.
    AncestorWritableByOthers,
}

impl Rejection {
    /// One plain sentence for a person reading the probe's stderr.
    pub fn explanation(&self) -> &'static str {
        match self {
            Self::Unresolvable => "the path cannot be resolved (dangling link, loop or no access)",
            Self::OutsideReviewedRoots => "it resolves outside the reviewed driver directories",
            Self::NotRegularFile => "it is not a regular file",
            Self::ImageWritableByOthers => "the image is writable by group or others",
            Self::AncestorUnreadable => "a directory above it cannot be inspected",
            Self::AncestorNotDirectory => "a path component above it is not a directory",
            Self::AncestorWritableByOthers => {
                "a directory above it (from /usr down) is writable by group or others"
            }
        }
    }
}

/// The outcome of reviewing one candidate path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing exists at the candidate path.
    Absent,
    /// Something exists but may not be opened.
    Rejected(Rejection),
    /// The canonical path that may be opened.
    Accepted(PathBuf),
}

/// Reviews one candidate against the reviewed roots and the ancestor floor.
pub fn review_candidate(candidate: &Path, roots: &[PathBuf], ancestor_floor: &Path) -> Verdict {
    // A dangling link still "exists": something is at a reviewed path, so a
    // refusal (not "no driver") is the honest report. So is a path that
    // cannot be inspected at all (e.g. no search permission on a directory).
    match fs::symlink_metadata(candidate) {
        Ok(_) => {}
        Err(error) if matches!(error.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            return Verdict::Absent;
        }
        Err(_) => return Verdict::Rejected(Rejection::Unresolvable),
    }
    match accepted_path(candidate, roots, ancestor_floor) {
        Ok(path) => Verdict::Accepted(path),
        Err(rejection) => Verdict::Rejected(rejection),
    }
}

fn accepted_path(
    candidate: &Path,
    roots: &[PathBuf],
    ancestor_floor: &Path,
) -> Result<PathBuf, Rejection> {
    let canonical = fs::canonicalize(candidate).map_err(|_| Rejection::Unresolvable)?;
    let under_a_root = roots
        .iter()
        .any(|root| canonical.starts_with(root) && canonical != *root);
    if !under_a_root || !canonical.starts_with(ancestor_floor) {
        return Err(Rejection::OutsideReviewedRoots);
    }
    let metadata = fs::symlink_metadata(&canonical).map_err(|_| Rejection::Unresolvable)?;
    if !metadata.file_type().is_file() {
        return Err(Rejection::NotRegularFile);
    }
    if metadata.permissions().mode() & GROUP_OR_OTHER_WRITE != 0 {
        return Err(Rejection::ImageWritableByOthers);
    }
    for ancestor in canonical
        .ancestors()
        .skip(1)
        .take_while(|ancestor| ancestor.starts_with(ancestor_floor))
    {
        check_ancestor(ancestor)?;
    }
    Ok(canonical)
}

fn check_ancestor(directory: &Path) -> Result<(), Rejection> {
    let metadata = fs::symlink_metadata(directory).map_err(|_| Rejection::AncestorUnreadable)?;
    if !metadata.file_type().is_dir() {
        return Err(Rejection::AncestorNotDirectory);
    }
    if metadata.permissions().mode() & GROUP_OR_OTHER_WRITE != 0 {
        return Err(Rejection::AncestorWritableByOthers);
    }
    Ok(())
}

/// Why no candidate produced an open image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchFailure {
    /// No candidate path existed.
    NoneExisted,
    /// At least one existed, but none was accepted and opened.
    NoneAcceptedAndOpened,
}

/// Tries each candidate in order: review it, and open the accepted canonical
/// path with `open`; returns the first image that opens.
pub fn open_first_accepted<Image>(
    candidates: &[PathBuf],
    roots: &[PathBuf],
    ancestor_floor: &Path,
    mut open: impl FnMut(&Path) -> Option<Image>,
) -> Result<Image, SearchFailure> {
    let mut any_existed = false;
    for candidate in candidates {
        match review_candidate(candidate, roots, ancestor_floor) {
            Verdict::Absent => {}
            Verdict::Rejected(_) => any_existed = true,
            Verdict::Accepted(path) => {
                any_existed = true;
                if let Some(image) = open(&path) {
                    return Ok(image);
                }
            }
        }
    }
    Err(if any_existed {
        SearchFailure::NoneAcceptedAndOpened
    } else {
        SearchFailure::NoneExisted
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A private directory tree standing in for `/usr`, removed on drop.
    struct Sandbox {
        floor: PathBuf,
    }

    static NEXT_SANDBOX: AtomicUsize = AtomicUsize::new(0);

    impl Sandbox {
        fn new() -> Self {
            let unique = format!(
                "rextio-reviewed-{}-{}",
                std::process::id(),
                NEXT_SANDBOX.fetch_add(1, Ordering::Relaxed)
            );
            let base = fs::canonicalize(std::env::temp_dir()).unwrap().join(unique);
            let floor = base.join("usr");
            fs::create_dir_all(floor.join("lib/nvidia")).unwrap();
            fs::create_dir_all(floor.join("local/outside")).unwrap();
            for dir in [
                &base,
                &floor,
                &floor.join("lib"),
                &floor.join("lib/nvidia"),
                &floor.join("local"),
                &floor.join("local/outside"),
            ] {
                set_mode(dir, 0o755);
            }
            Self { floor }
        }

        fn roots(&self) -> Vec<PathBuf> {
            vec![self.floor.join("lib"), self.floor.join("lib64")]
        }

        fn image(&self, relative: &str, mode: u32) -> PathBuf {
            let path = self.floor.join(relative);
            fs::write(&path, b"\x7fELF").unwrap();
            set_mode(&path, mode);
            path
        }

        fn review(&self, candidate: &Path) -> Verdict {
            review_candidate(candidate, &self.roots(), &self.floor)
        }
    }

    impl Drop for Sandbox {
        fn drop(&mut self) {
            if let Some(base) = self.floor.parent() {
                let _ = fs::remove_dir_all(base);
            }
        }
    }

    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn accepts_an_owner_only_image_below_a_root() {
        let sandbox = Sandbox::new();
        let image = sandbox.image("lib/nvidia/libcuda.so.1", 0o644);
        assert_eq!(sandbox.review(&image), Verdict::Accepted(image));
    }

    #[test]
    fn accepts_a_link_that_stays_inside_the_roots() {
        let sandbox = Sandbox::new();
        let real = sandbox.image("lib/nvidia/libcuda.so.550.54", 0o755);
        let link = sandbox.floor.join("lib/nvidia/libcuda.so.1");
        symlink("libcuda.so.550.54", &link).unwrap();
        assert_eq!(sandbox.review(&link), Verdict::Accepted(real));
    }

    #[test]
    fn a_missing_candidate_is_absent() {
        let sandbox = Sandbox::new();
        let missing = sandbox.floor.join("lib/nvidia/libcuda.so.1");
        assert_eq!(sandbox.review(&missing), Verdict::Absent);
        let under_missing_dir = sandbox.floor.join("lib/wsl/lib/libcuda.so.1");
        assert_eq!(sandbox.review(&under_missing_dir), Verdict::Absent);
        let under_a_file = sandbox
            .image("lib/nvidia/plain", 0o644)
            .join("libcuda.so.1");
        assert_eq!(sandbox.review(&under_a_file), Verdict::Absent);
    }

    #[test]
    fn refuses_group_or_world_writable_images() {
        let sandbox = Sandbox::new();
        for mode in [0o664, 0o646, 0o666, 0o775] {
            let image = sandbox.image("lib/nvidia/libcuda.so.1", mode);
            assert_eq!(
                sandbox.review(&image),
                Verdict::Rejected(Rejection::ImageWritableByOthers),
                "{mode:o}"
            );
        }
    }

    #[test]
    fn refuses_a_writable_ancestor_at_every_level_from_the_floor_down() {
        let sandbox = Sandbox::new();
        let image = sandbox.image("lib/nvidia/libcuda.so.1", 0o644);
        for (dir, mode) in [("lib/nvidia", 0o775), ("lib", 0o757), ("", 0o1777)] {
            let dir = sandbox.floor.join(dir);
            set_mode(&dir, mode);
            assert_eq!(
                sandbox.review(&image),
                Verdict::Rejected(Rejection::AncestorWritableByOthers),
                "{}",
                dir.display()
            );
            set_mode(&dir, 0o755);
        }
        assert_eq!(sandbox.review(&image), Verdict::Accepted(image));
    }

    #[test]
    fn ignores_writable_directories_above_the_floor() {
        let sandbox = Sandbox::new();
        let image = sandbox.image("lib/nvidia/libcuda.so.1", 0o644);
        let above = sandbox.floor.parent().unwrap().to_path_buf();
        set_mode(&above, 0o777);
        assert_eq!(sandbox.review(&image), Verdict::Accepted(image));
        set_mode(&above, 0o755);
    }

    #[test]
    fn refuses_links_that_escape_the_roots_or_the_floor() {
        let sandbox = Sandbox::new();
        // `lib64x` and `libx` share a string prefix with the roots `lib64`
        // and `lib` but are not below them: roots compare by path component.
        for dir in ["lib64x", "libx", "local/outside"] {
            fs::create_dir_all(sandbox.floor.join(dir)).unwrap();
            set_mode(&sandbox.floor.join(dir), 0o755);
        }
        let escaped = sandbox.floor.parent().unwrap().join("libcuda.so.1");
        fs::write(&escaped, b"x").unwrap();
        set_mode(&escaped, 0o644);
        let targets = [
            sandbox.image("lib64x/libcuda.so.1", 0o644),
            sandbox.image("libx/libcuda.so.1", 0o644),
            sandbox.image("local/outside/libcuda.so.1", 0o644),
            escaped,
        ];
        let link = sandbox.floor.join("lib/nvidia/libcuda.so.1");
        for target in targets {
            assert_eq!(
                sandbox.review(&target),
                Verdict::Rejected(Rejection::OutsideReviewedRoots),
                "{}",
                target.display()
            );
            symlink(&target, &link).unwrap();
            assert_eq!(
                sandbox.review(&link),
                Verdict::Rejected(Rejection::OutsideReviewedRoots),
                "link to {}",
                target.display()
            );
            fs::remove_file(&link).unwrap();
        }
    }

    #[test]
    fn refuses_dangling_links_and_non_files() {
        let sandbox = Sandbox::new();
        let link = sandbox.floor.join("lib/nvidia/libcuda.so.1");
        symlink("nowhere.so", &link).unwrap();
        assert_eq!(
            sandbox.review(&link),
            Verdict::Rejected(Rejection::Unresolvable)
        );
        fs::remove_file(&link).unwrap();
        fs::create_dir(&link).unwrap();
        set_mode(&link, 0o755);
        assert_eq!(
            sandbox.review(&link),
            Verdict::Rejected(Rejection::NotRegularFile)
        );
    }

    #[test]
    fn the_root_itself_is_not_an_image() {
        let sandbox = Sandbox::new();
        let root = sandbox.floor.join("lib");
        assert_eq!(
            sandbox.review(&root),
            Verdict::Rejected(Rejection::OutsideReviewedRoots)
        );
    }

    #[test]
    fn search_reports_not_found_only_when_nothing_exists() {
        let sandbox = Sandbox::new();
        let candidates = vec![
            sandbox.floor.join("lib/wsl/libcuda.so.1"),
            sandbox.floor.join("lib/nvidia/libcuda.so.1"),
        ];
        let open_any = |path: &Path| Some(path.to_path_buf());
        assert_eq!(
            open_first_accepted(&candidates, &sandbox.roots(), &sandbox.floor, open_any),
            Err(SearchFailure::NoneExisted)
        );
        sandbox.image("lib/nvidia/libcuda.so.1", 0o666);
        assert_eq!(
            open_first_accepted(&candidates, &sandbox.roots(), &sandbox.floor, open_any),
            Err(SearchFailure::NoneAcceptedAndOpened)
        );
    }

    #[test]
    fn search_tries_the_next_candidate_after_any_failure() {
        let sandbox = Sandbox::new();
        fs::create_dir_all(sandbox.floor.join("lib/first")).unwrap();
        set_mode(&sandbox.floor.join("lib/first"), 0o755);
        let first = sandbox.image("lib/first/libcuda.so.1", 0o644);
        let second = sandbox.image("lib/nvidia/libcuda.so.1", 0o644);
        let candidates = vec![
            sandbox.floor.join("lib/refused.so"),
            first.clone(),
            second.clone(),
        ];
        fs::write(&candidates[0], b"x").unwrap();
        set_mode(&candidates[0], 0o666);
        // The first accepted candidate fails to open; the second opens.
        let opened = open_first_accepted(&candidates, &sandbox.roots(), &sandbox.floor, |path| {
            (path != first).then(|| path.to_path_buf())
        });
        assert_eq!(opened, Ok(second));
        let none_open = open_first_accepted(&candidates, &sandbox.roots(), &sandbox.floor, |_| {
            None::<PathBuf>
        });
        assert_eq!(none_open, Err(SearchFailure::NoneAcceptedAndOpened));
    }

    #[test]
    fn production_lists_match_the_contract() {
        // Contract §6, exactly and in order.
        let x86_64: Vec<PathBuf> = [
            "/usr/lib/wsl/lib/libcuda.so.1",
            "/usr/local/nvidia/lib64/libcuda.so.1",
            "/usr/local/nvidia/lib/libcuda.so.1",
            "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "/usr/lib64/libcuda.so.1",
            "/usr/lib/libcuda.so.1",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(candidate_paths(LINUX_X86_64_CANDIDATE_DIRS), x86_64);
        let aarch64: Vec<PathBuf> = [
            "/usr/local/nvidia/lib64/libcuda.so.1",
            "/usr/local/nvidia/lib/libcuda.so.1",
            "/usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1",
            "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
            "/usr/lib64/libcuda.so.1",
            "/usr/lib/libcuda.so.1",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(candidate_paths(LINUX_AARCH64_CANDIDATE_DIRS), aarch64);
        let roots: Vec<PathBuf> = [
            "/usr/lib",
            "/usr/lib64",
            "/usr/local/nvidia/lib",
            "/usr/local/nvidia/lib64",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(reviewed_roots(), roots);
        assert_eq!(ANCESTOR_CHECK_FLOOR, "/usr");
        for candidate in x86_64.iter().chain(&aarch64) {
            assert!(roots.iter().any(|root| candidate.starts_with(root)));
        }
    }
}
