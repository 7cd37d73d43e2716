//! Which driver image may be opened, and opening it so that the file that
//! was checked is the file that is loaded (docs/interfaces.md, The loader seam).
//!
//! A candidate is walked one path component at a time from `/`, each opened
//! with `O_PATH | O_NOFOLLOW` relative to the descriptor of the directory
//! before it, and each checked through its own descriptor (`fstat`), never
//! by a second lookup of the path:
//!
//! - every directory walked and every symbolic link followed is owned by
//!   root; every directory has no group/other write bit, except the strict
//!   ancestors of the floor (`/` above `/usr`), which need only be root's;
//! - a symbolic link is followed by reading it through its descriptor and
//!   walking its target the same way (relative targets from the directory
//!   that holds the link, absolute ones from `/`; `..` returns to the
//!   directory descriptor already held, so nothing is looked up again). So
//!   `libcuda.so.1 -> libcuda.so.<version>`, as installers lay it out, is
//!   followed, and so is any link whose every step passes these checks: a
//!   link can only lead where root put it. At most [`MAX_LINKS`] links;
//! - the final file is a regular file strictly below a reviewed root (by the
//!   path the walk resolved), owned by root, with no group/other write bit,
//!   and with exactly one hard link unless it lies on a read-only mount
//!   (OSTree's `/usr`, a read-only Nix store), where nobody can add one.
//!
//! The accepted image is the open descriptor itself: the loader passes
//! `/proc/self/fd/N` to the dynamic linker, which reopens that very file.
//! Only a regular file is ever reopened, so a FIFO or device cannot block.
//!
//! The rule takes its roots and floor as parameters so tests can exercise it
//! on temporary directories; production uses the consts below.
//!
//! The ownership rules (root's alone, the sticky-directory case, the link
//! limits) are shared with the pinned probe's interpreter check
//! (`python/rextio_device_cuda/_root_owned.py`): one table of cases,
//! `probe/tests/ownership_cases.json`, runs through both walks.

use std::collections::VecDeque;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use crate::error::{LoadError, Refusal, RefusalCause};
use crate::rejection::Rejection;

/// The driver image's file name, the candidate directories per
/// architecture, the reviewed roots (`/run/opengl-driver/lib` is a candidate
/// but no root: NixOS makes it a link into `/nix/store`, where the image
/// really lies) and the floor of the write-bit check (its strict ancestors
/// need only be root's): generated from the provider spec.
pub use crate::generated::linux::{
    ANCESTOR_CHECK_FLOOR, LINUX_AARCH64_CANDIDATE_DIRS, LINUX_DRIVER_FILE_NAME,
    LINUX_X86_64_CANDIDATE_DIRS, REVIEWED_ROOTS,
};

/// The most symbolic links one candidate may pass through (the kernel's own
/// limit for a path lookup).
pub const MAX_LINKS: usize = 40;

/// Group and other write permission bits.
const GROUP_OR_OTHER_WRITE: u32 = 0o022;

/// The sticky bit: in such a directory only an entry's owner (or the
/// directory's owner, or root) may rename or unlink the entry.
const STICKY: u32 = 0o1000;

/// The only owner of a trusted image, directory or link.
const ROOT_UID: u32 = 0;

/// Where to look for the driver and what to trust: the candidates in order,
/// the reviewed roots and the floor of the write-bit check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// The candidate files (`DIR/libcuda.so.1`), tried in order.
    pub candidates: Vec<PathBuf>,
    /// The reviewed roots: an image must resolve strictly below one.
    pub roots: Vec<PathBuf>,
    /// The directory from which down the write-bit check walks (`/usr`).
    pub floor: PathBuf,
}

impl Search {
    /// The reviewed candidates (for `candidate_dirs`), roots and floor.
    pub fn production(candidate_dirs: &[&str]) -> Self {
        Self {
            candidates: candidate_paths(candidate_dirs),
            roots: reviewed_roots(),
            floor: PathBuf::from(ANCESTOR_CHECK_FLOOR),
        }
    }

    /// An explicit driver directory (`--driver-root DIR`):
    /// only `DIR/libcuda.so.1` is tried, and the canonical DIR is a reviewed
    /// root beside the production ones. DIR is canonicalized first because
    /// it is often reached through links (`/usr/local/cuda` ->
    /// `/etc/alternatives/cuda` -> `/usr/local/cuda-12.8`); the walk then
    /// checks every component of the canonical path from `/` down like any
    /// other candidate. Fails when DIR cannot be resolved (nothing there).
    pub fn driver_root(dir: &Path) -> io::Result<Self> {
        let canonical = std::fs::canonicalize(dir)?;
        let mut roots = reviewed_roots();
        roots.push(canonical.clone());
        Ok(Self {
            candidates: vec![canonical.join(LINUX_DRIVER_FILE_NAME)],
            roots,
            floor: PathBuf::from(ANCESTOR_CHECK_FLOOR),
        })
    }
}

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

/// A driver image that passed review: its open descriptor (`O_PATH`) and
/// the path the walk resolved (for diagnostics only).
#[derive(Debug)]
pub struct ReviewedImage {
    file: OwnedFd,
    path: PathBuf,
}

impl ReviewedImage {
    /// The path the walk resolved; for a person, never for a record.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `/proc/self/fd/N`: opening this reopens the reviewed file itself,
    /// whatever has since been renamed over its path.
    pub fn descriptor_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

/// The outcome of reviewing one candidate path.
#[derive(Debug)]
pub enum Verdict {
    /// Nothing exists at the candidate path.
    Absent,
    /// Something exists but may not be opened.
    Rejected(Rejection),
    /// The open image that may be loaded.
    Accepted(ReviewedImage),
}

impl Verdict {
    /// The verdict without the descriptor: for tests and diagnostics.
    pub fn summary(&self) -> Result<Option<&Path>, &Rejection> {
        match self {
            Self::Absent => Ok(None),
            Self::Rejected(rejection) => Err(rejection),
            Self::Accepted(image) => Ok(Some(image.path())),
        }
    }
}

/// Reviews one absolute candidate against the reviewed roots and the floor.
pub fn review_candidate(candidate: &Path, roots: &[PathBuf], ancestor_floor: &Path) -> Verdict {
    let walk = Walk {
        roots,
        floor: ancestor_floor,
    };
    match walk.open(candidate) {
        Ok(image) => Verdict::Accepted(image),
        Err(Stop::Absent) => Verdict::Absent,
        Err(Stop::Rejected(rejection)) => Verdict::Rejected(rejection),
    }
}

/// Why a walk stopped.
enum Stop {
    /// The candidate does not exist (as `lstat` of it would say).
    Absent,
    Rejected(Rejection),
}

impl From<Rejection> for Stop {
    fn from(rejection: Rejection) -> Self {
        Self::Rejected(rejection)
    }
}

/// What `fstat` says about one opened component.
struct Status {
    kind: u32,
    uid: u32,
    mode: u32,
    links: u64,
}

/// A directory held open during the walk, with the path that led to it.
struct Directory {
    file: OwnedFd,
    path: PathBuf,
    /// Group- or other-writable (and so sticky and root's, or refused):
    /// every entry below it must be root's.
    writable_by_others: bool,
}

struct Walk<'a> {
    roots: &'a [PathBuf],
    floor: &'a Path,
}

impl Walk<'_> {
    fn open(&self, candidate: &Path) -> Result<ReviewedImage, Stop> {
        if !candidate.is_absolute() {
            return Err(Rejection::Unresolvable.into());
        }
        let mut pending: VecDeque<OsString> = VecDeque::new();
        push_components(&mut pending, candidate);
        let mut stack = vec![self.root()?];
        let mut links = 0;
        // Until the candidate's own last component has been followed as a
        // link, a missing component means "nothing there" (as lstat says);
        // afterwards it is a dangling link.
        let mut followed_final_link = false;
        // A refusal on the way is kept while the walk goes on: a candidate
        // that turns out not to exist is absent, not refused. Walking on only
        // opens `O_PATH` handles and reads links, which cannot block.
        let mut refused: Option<Rejection> = None;
        let mut refuse = |rejection: Rejection| {
            refused.get_or_insert(rejection);
        };
        let missing = |followed: bool| {
            if followed {
                Stop::Rejected(Rejection::Unresolvable)
            } else {
                Stop::Absent
            }
        };
        while let Some(name) = pending.pop_front() {
            if name == ".." {
                if stack.len() > 1 {
                    stack.pop();
                }
                continue;
            }
            let parent = stack.last().ok_or(Rejection::Unresolvable)?;
            let path = parent.path.join(&name);
            let file = match open_component(&parent.file, &name) {
                Ok(file) => file,
                Err(error) if is_missing(&error) => return Err(missing(followed_final_link)),
                Err(_) => return Err(Rejection::Unresolvable.into()),
            };
            let status = status_of(&file).map_err(|_| Rejection::Unresolvable)?;
            // In a sticky directory others may write, only the entry's owner
            // (besides root) can rename or unlink it: the entry must be root's.
            if parent.writable_by_others && status.uid != ROOT_UID {
                refuse(Rejection::EntryBelowWritableDirectoryNotOwnedByRoot);
            }
            match status.kind {
                libc::S_IFLNK => {
                    if status.uid != ROOT_UID {
                        refuse(Rejection::AncestorNotOwnedByRoot);
                    }
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(Rejection::Unresolvable.into());
                    }
                    followed_final_link |= pending.is_empty();
                    let target = read_link(&file).map_err(|_| Rejection::Unresolvable)?;
                    if target.as_os_str().is_empty() {
                        return Err(Rejection::Unresolvable.into());
                    }
                    if target.is_absolute() {
                        stack.truncate(1);
                    }
                    let mut rest = VecDeque::new();
                    push_components(&mut rest, &target);
                    rest.extend(pending.drain(..));
                    pending = rest;
                }
                libc::S_IFDIR => {
                    if let Err(rejection) = self.check_directory(&status, &path) {
                        refuse(rejection);
                    }
                    let writable_by_others = status.mode & GROUP_OR_OTHER_WRITE != 0;
                    stack.push(Directory {
                        file,
                        path,
                        writable_by_others,
                    });
                }
                _ if !pending.is_empty() => {
                    // A file where a directory should be: ENOTDIR.
                    return Err(missing(followed_final_link));
                }
                _ => {
                    if let Some(rejection) = refused {
                        return Err(rejection.into());
                    }
                    return self.check_image(file, &status, path);
                }
            }
        }
        // The walk ended on a directory.
        Err(refused.unwrap_or(Rejection::NotRegularFile).into())
    }

    fn root(&self) -> Result<Directory, Stop> {
        let file = open_path(c"/", libc::AT_FDCWD).map_err(|_| Rejection::Unresolvable)?;
        let status = status_of(&file).map_err(|_| Rejection::Unresolvable)?;
        let path = PathBuf::from("/");
        self.check_directory(&status, &path)?;
        Ok(Directory {
            file,
            path,
            writable_by_others: status.mode & GROUP_OR_OTHER_WRITE != 0,
        })
    }

    fn check_directory(&self, status: &Status, path: &Path) -> Result<(), Rejection> {
        if status.uid != ROOT_UID {
            return Err(Rejection::AncestorNotOwnedByRoot);
        }
        let above_floor = self.floor.starts_with(path) && self.floor != path;
        // A writable directory passes only as the Nix store does
        // (`root:nixbld 1775`): sticky and root's; the walk then requires
        // the entry below it to be root's too.
        let sticky_and_roots = status.mode & STICKY != 0;
        if !above_floor && status.mode & GROUP_OR_OTHER_WRITE != 0 && !sticky_and_roots {
            return Err(Rejection::AncestorWritableByOthers);
        }
        Ok(())
    }

    fn check_image(
        &self,
        file: OwnedFd,
        status: &Status,
        path: PathBuf,
    ) -> Result<ReviewedImage, Stop> {
        let under_a_root = self
            .roots
            .iter()
            .any(|root| path.starts_with(root) && path != *root);
        if !under_a_root {
            return Err(Rejection::OutsideReviewedRoots.into());
        }
        if status.kind != libc::S_IFREG {
            return Err(Rejection::NotRegularFile.into());
        }
        if status.uid != ROOT_UID {
            return Err(Rejection::ImageNotOwnedByRoot.into());
        }
        if status.mode & GROUP_OR_OTHER_WRITE != 0 {
            return Err(Rejection::ImageWritableByOthers.into());
        }
        // Nobody can add a link on a read-only mount (OSTree's `/usr`, a
        // read-only Nix store); on a writable one a second link is refused.
        if status.links != 1 && !on_read_only_mount(&file) {
            return Err(Rejection::ImageHasOtherLinks.into());
        }
        Ok(ReviewedImage { file, path })
    }
}

/// Appends `path`'s components: `/` and `.` vanish, `..` is kept for the walk.
fn push_components(pending: &mut VecDeque<OsString>, path: &Path) {
    for component in path.components() {
        match component {
            Component::Normal(name) => pending.push_back(name.to_os_string()),
            Component::ParentDir => pending.push_back(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
}

fn is_missing(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR))
}

/// `openat(directory, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)`: a handle that
/// reads nothing, follows no link and cannot block (not even on a FIFO).
fn open_component(directory: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    let name = CString::new(name.as_bytes()).map_err(|_| io::ErrorKind::InvalidInput)?;
    open_path(&name, directory.as_raw_fd())
}

fn open_path(name: &core::ffi::CStr, directory: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and lives across the call; the flags
    // make the call open nothing for reading and follow no final link.
    let fd = unsafe {
        libc::openat(
            directory,
            name.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat just returned this descriptor, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn status_of(file: &OwnedFd) -> io::Result<Status> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut stat: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: the descriptor is open and `stat` is a live, writable struct.
    if unsafe { libc::fstat(file.as_raw_fd(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // st_nlink is u64 on x86_64 but u32 on aarch64.
    #[allow(clippy::useless_conversion)]
    Ok(Status {
        kind: stat.st_mode & libc::S_IFMT,
        uid: stat.st_uid,
        mode: stat.st_mode & 0o7777,
        links: u64::from(stat.st_nlink),
    })
}

/// Whether the mount holding this open file is read-only (`ST_RDONLY` of
/// `fstatvfs` on the descriptor, so it is the checked file's own mount).
/// Any failure counts as writable.
fn on_read_only_mount(file: &OwnedFd) -> bool {
    // SAFETY: an all-zero `statvfs` is a valid value of this plain C struct.
    let mut stat: libc::statvfs = unsafe { core::mem::zeroed() };
    // SAFETY: the descriptor is open (O_PATH descriptors take fstatfs since
    // Linux 3.12) and `stat` is a live, writable struct.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut stat) } != 0 {
        return false;
    }
    stat.f_flag & libc::ST_RDONLY != 0
}

/// The target of the link this `O_PATH | O_NOFOLLOW` descriptor names.
fn read_link(link: &OwnedFd) -> io::Result<PathBuf> {
    let mut buffer = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: an empty path with a link's O_PATH descriptor reads that link
    // (Linux 2.6.39+); the buffer is live and its length is passed.
    let length = unsafe {
        libc::readlinkat(
            link.as_raw_fd(),
            c"".as_ptr(),
            buffer.as_mut_ptr().cast(),
            buffer.len(),
        )
    };
    let length = usize::try_from(length).map_err(|_| io::Error::last_os_error())?;
    if length >= buffer.len() {
        return Err(io::ErrorKind::InvalidData.into());
    }
    buffer.truncate(length);
    Ok(PathBuf::from(OsString::from_vec(buffer)))
}

/// Tries each candidate in order: review it, and load the accepted image
/// with `open` (which says, path-free, why an image did not load); returns
/// the first image that loads.
///
/// # Errors
///
/// [`LoadError::DriverNotFound`] (naming the directories searched) when no
/// candidate exists;
/// [`LoadError::DriverLoadFailed`] with why each existing one was not
/// loaded otherwise.
pub fn open_first_accepted<Image>(
    candidates: &[PathBuf],
    roots: &[PathBuf],
    ancestor_floor: &Path,
    mut open: impl FnMut(&ReviewedImage) -> Result<Image, String>,
) -> Result<Image, LoadError> {
    let mut refusals = Vec::new();
    for candidate in candidates {
        let cause = match review_candidate(candidate, roots, ancestor_floor) {
            Verdict::Absent => continue,
            Verdict::Rejected(rejection) => RefusalCause::Rule(rejection),
            Verdict::Accepted(image) => match open(&image) {
                Ok(loaded) => return Ok(loaded),
                Err(reason) => RefusalCause::NotLoadable { reason },
            },
        };
        refusals.push(Refusal {
            candidate: candidate.clone(),
            cause,
        });
    }
    if refusals.is_empty() {
        // Each candidate is `DIR/libcuda.so.1`: the error names the DIRs.
        let directory = |candidate: &PathBuf| candidate.parent().map(Path::to_path_buf);
        let searched = candidates.iter().filter_map(directory).collect();
        Err(LoadError::DriverNotFound { searched })
    } else {
        Err(LoadError::DriverLoadFailed { refusals })
    }
}

#[cfg(test)]
mod tests {
    //! These tests run as root (as `cargo xtask test` does): they give files
    //! and directories to another owner to show each refusal.
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Not root: the owner of every planted file that must be refused.
    const USER_UID: u32 = 1000;

    /// A private directory tree standing in for `/usr`, removed on drop.
    struct Sandbox {
        floor: PathBuf,
    }

    static NEXT_SANDBOX: AtomicUsize = AtomicUsize::new(0);

    type Summary = Result<Option<PathBuf>, Rejection>;

    impl Sandbox {
        fn new() -> Self {
            // SAFETY: geteuid has no preconditions.
            assert_eq!(
                unsafe { libc::geteuid() },
                0,
                "the loader tests run as root (cargo xtask test does)"
            );
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

        fn base(&self) -> PathBuf {
            self.floor.parent().unwrap().to_path_buf()
        }

        fn roots(&self) -> Vec<PathBuf> {
            vec![self.floor.join("lib"), self.floor.join("lib64")]
        }

        fn dir(&self, relative: &str) -> PathBuf {
            let path = self.floor.join(relative);
            fs::create_dir_all(&path).unwrap();
            set_mode(&path, 0o755);
            path
        }

        fn image(&self, relative: &str, mode: u32) -> PathBuf {
            let path = self.floor.join(relative);
            fs::write(&path, b"\x7fELF").unwrap();
            set_mode(&path, mode);
            path
        }

        fn review(&self, candidate: &Path) -> Summary {
            summary(review_candidate(candidate, &self.roots(), &self.floor))
        }
    }

    fn summary(verdict: Verdict) -> Summary {
        match verdict.summary() {
            Ok(path) => Ok(path.map(Path::to_path_buf)),
            Err(rejection) => Err(*rejection),
        }
    }

    impl Drop for Sandbox {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(self.base());
        }
    }

    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn owner(path: &Path, uid: u32) {
        std::os::unix::fs::lchown(path, Some(uid), None).unwrap();
    }

    fn mkfifo(path: &Path) {
        let name = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
    }

    #[test]
    fn accepts_a_root_owned_single_link_image_below_a_root() {
        let sandbox = Sandbox::new();
        let image = sandbox.image("lib/nvidia/libcuda.so.1", 0o644);
        assert_eq!(sandbox.review(&image), Ok(Some(image)));
    }

    #[test]
    fn the_accepted_descriptor_is_the_checked_file_even_after_a_rename() {
        let sandbox = Sandbox::new();
        let image = sandbox.image("lib/nvidia/libcuda.so.1", 0o644);
        let Verdict::Accepted(reviewed) =
            review_candidate(&image, &sandbox.roots(), &sandbox.floor)
        else {
            panic!("refused");
        };
        // Swap another file in under the same name: the descriptor still
        // reads the reviewed one.
        fs::rename(&image, sandbox.floor.join("lib/nvidia/old")).unwrap();
        fs::write(&image, b"impostor").unwrap();
        assert_eq!(fs::read(reviewed.descriptor_path()).unwrap(), b"\x7fELF");
    }

    #[test]
    fn accepts_a_link_that_stays_inside_the_roots() {
        let sandbox = Sandbox::new();
        let real = sandbox.image("lib/nvidia/libcuda.so.550.54", 0o755);
        let link = sandbox.floor.join("lib/nvidia/libcuda.so.1");
        symlink("libcuda.so.550.54", &link).unwrap();
        assert_eq!(sandbox.review(&link), Ok(Some(real.clone())));
        // Through a directory link, `..` and an absolute target too.
        sandbox.dir("lib/current");
        let via_dotdot = sandbox.floor.join("lib/current/libcuda.so.1");
        symlink("../nvidia/libcuda.so.1", &via_dotdot).unwrap();
        assert_eq!(sandbox.review(&via_dotdot), Ok(Some(real.clone())));
        symlink(
            sandbox.floor.join("lib/nvidia"),
            sandbox.floor.join("lib/alias"),
        )
        .unwrap();
        let via_dir_link = sandbox.floor.join("lib/alias/libcuda.so.1");
        assert_eq!(sandbox.review(&via_dir_link), Ok(Some(real)));
    }

    #[test]
    fn a_missing_candidate_is_absent() {
        let sandbox = Sandbox::new();
        let missing = sandbox.floor.join("lib/nvidia/libcuda.so.1");
        assert_eq!(sandbox.review(&missing), Ok(None));
        let under_missing_dir = sandbox.floor.join("lib/wsl/lib/libcuda.so.1");
        assert_eq!(sandbox.review(&under_missing_dir), Ok(None));
        let under_a_file = sandbox
            .image("lib/nvidia/plain", 0o644)
            .join("libcuda.so.1");
        assert_eq!(sandbox.review(&under_a_file), Ok(None));
        // A directory link on the way whose target lacks the file: absent,
        // as lstat of the candidate says.
        symlink("nvidia", sandbox.floor.join("lib/alias")).unwrap();
        let via_link = sandbox.floor.join("lib/alias/libcuda.so.1");
        assert_eq!(sandbox.review(&via_link), Ok(None));
        // Nothing there below an unsafe directory is still nothing there.
        set_mode(&sandbox.floor.join("lib/nvidia"), 0o777);
        owner(&sandbox.floor.join("lib/nvidia"), USER_UID);
        assert_eq!(sandbox.review(&missing), Ok(None));
    }

    #[test]
    fn refuses_group_or_world_writable_images() {
        let sandbox = Sandbox::new();
        for mode in [0o664, 0o646, 0o666, 0o775] {
            let image = sandbox.image("lib/nvidia/libcuda.so.1", mode);
            assert_eq!(
                sandbox.review(&image),
                Err(Rejection::ImageWritableByOthers),
                "{mode:o}"
            );
        }
    }

    #[test]
    fn refuses_an_image_not_owned_by_root() {
        let sandbox = Sandbox::new();
        let image = sandbox.image("lib/nvidia/libcuda.so.1", 0o644);
        owner(&image, USER_UID);
        assert_eq!(sandbox.review(&image), Err(Rejection::ImageNotOwnedByRoot));
        owner(&image, 0);
        assert_eq!(sandbox.review(&image), Ok(Some(image)));
    }

    #[test]
    fn refuses_a_directory_not_owned_by_root_at_every_level_from_the_root_down() {
        let sandbox = Sandbox::new();
        let image = sandbox.image("lib/nvidia/libcuda.so.1", 0o755);
        // Every level, including the sandbox base above the floor, whose
        // write bits are not checked but whose owner is.
        for dir in [
            sandbox.floor.join("lib/nvidia"),
            sandbox.floor.join("lib"),
            sandbox.floor.clone(),
        ] {
            owner(&dir, USER_UID);
            assert_eq!(
                sandbox.review(&image),
                Err(Rejection::AncestorNotOwnedByRoot),
                "{}",
                dir.display()
            );
            owner(&dir, 0);
        }
        // The base lies in the sticky, world-writable temporary directory:
        // the entry below a writable directory must be root's, and that rule
        // names the refusal first.
        owner(&sandbox.base(), USER_UID);
        assert_eq!(
            sandbox.review(&image),
            Err(Rejection::EntryBelowWritableDirectoryNotOwnedByRoot)
        );
        owner(&sandbox.base(), 0);
        assert_eq!(sandbox.review(&image), Ok(Some(image)));
    }

    #[test]
    fn refuses_a_link_not_owned_by_root() {
        let sandbox = Sandbox::new();
        sandbox.image("lib/nvidia/libcuda.so.550", 0o644);
        let link = sandbox.floor.join("lib/nvidia/libcuda.so.1");
        symlink("libcuda.so.550", &link).unwrap();
        owner(&link, USER_UID);
        assert_eq!(
            sandbox.review(&link),
            Err(Rejection::AncestorNotOwnedByRoot)
        );
    }

    #[test]
    fn refuses_an_image_with_a_second_hard_link() {
        let sandbox = Sandbox::new();
        let image = sandbox.image("lib/nvidia/libcuda.so.1", 0o644);
        let second = sandbox.floor.join("lib/nvidia/copy");
        fs::hard_link(&image, &second).unwrap();
        assert_eq!(sandbox.review(&image), Err(Rejection::ImageHasOtherLinks));
        fs::remove_file(&second).unwrap();
        assert_eq!(sandbox.review(&image), Ok(Some(image)));
    }

    #[test]
    fn refuses_a_writable_ancestor_at_every_level_from_the_floor_down() {
        let sandbox = Sandbox::new();
        let image = sandbox.image("lib/nvidia/libcuda.so.1", 0o644);
        // Writable and not sticky, at each level (0o1777 passes: see
        // `a_sticky_root_owned_writable_directory_passes_only_above_root_entries`).
        for (dir, mode) in [
            ("lib/nvidia", 0o775),
            ("lib", 0o757),
            ("", 0o0777),
            ("lib", 0o0770),
        ] {
            let dir = sandbox.floor.join(dir);
            set_mode(&dir, mode);
            assert_eq!(
                sandbox.review(&image),
                Err(Rejection::AncestorWritableByOthers),
                "{}",
                dir.display()
            );
            set_mode(&dir, 0o755);
        }
        assert_eq!(sandbox.review(&image), Ok(Some(image)));
    }

    #[test]
    fn a_sticky_root_owned_writable_directory_passes_only_above_root_entries() {
        let sandbox = Sandbox::new();
        let image = sandbox.image("lib/nvidia/libcuda.so.1", 0o644);
        let store = sandbox.floor.join("lib");
        // The Nix store's own mode (`root:nixbld 1775`) and /tmp's.
        for mode in [0o1775, 0o1777, 0o1757] {
            set_mode(&store, mode);
            assert_eq!(sandbox.review(&image), Ok(Some(image.clone())), "{mode:o}");
        }
        // A foreign entry below it (a directory, or a link) is refused, and
        // the writable-directory rule says why.
        let below = sandbox.floor.join("lib/nvidia");
        owner(&below, USER_UID);
        assert_eq!(
            sandbox.review(&image),
            Err(Rejection::EntryBelowWritableDirectoryNotOwnedByRoot)
        );
        owner(&below, 0);
        let link = store.join("alias");
        symlink("nvidia/libcuda.so.1", &link).unwrap();
        assert_eq!(sandbox.review(&link), Ok(Some(image.clone())));
        owner(&link, USER_UID);
        assert_eq!(
            sandbox.review(&link),
            Err(Rejection::EntryBelowWritableDirectoryNotOwnedByRoot)
        );
        // The image itself right below a writable sticky directory.
        let direct = sandbox.image("lib/libcuda.so.1", 0o644);
        assert_eq!(sandbox.review(&direct), Ok(Some(direct.clone())));
        owner(&direct, USER_UID);
        assert_eq!(
            sandbox.review(&direct),
            Err(Rejection::EntryBelowWritableDirectoryNotOwnedByRoot)
        );
        // Sticky but not root's: refused by its owner.
        set_mode(&store, 0o1775);
        owner(&store, USER_UID);
        assert_eq!(
            sandbox.review(&image),
            Err(Rejection::AncestorNotOwnedByRoot)
        );
        owner(&store, 0);
        set_mode(&store, 0o755);
    }

    #[test]
    fn a_driver_root_is_canonicalized_and_is_the_only_candidate() {
        let sandbox = Sandbox::new();
        let real = sandbox.image("lib/nvidia/libcuda.so.550.54", 0o644);
        symlink(
            "libcuda.so.550.54",
            sandbox.floor.join("lib/nvidia/libcuda.so.1"),
        )
        .unwrap();
        // Reached through a link, as /usr/local/cuda -> /etc/alternatives/cuda is.
        let alias = sandbox.floor.join("local/compat");
        symlink(sandbox.floor.join("lib/nvidia"), &alias).unwrap();
        let search = Search::driver_root(&alias).unwrap();
        let canonical = sandbox.floor.join("lib/nvidia");
        assert_eq!(search.candidates, [canonical.join("libcuda.so.1")]);
        assert_eq!(search.roots.last(), Some(&canonical));
        assert_eq!(&search.roots[..REVIEWED_ROOTS.len()], reviewed_roots());
        let open = |image: &ReviewedImage| Ok::<_, String>(image.path().to_path_buf());
        let opened = open_first_accepted(&search.candidates, &search.roots, &search.floor, open);
        assert_eq!(opened, Ok(real.clone()));
        // Every other check still applies: a foreign directory on the way.
        owner(&sandbox.floor.join("lib"), USER_UID);
        let refused = open_first_accepted(&search.candidates, &search.roots, &search.floor, open);
        assert_eq!(
            refused,
            Err(LoadError::DriverLoadFailed {
                refusals: vec![Refusal {
                    candidate: search.candidates[0].clone(),
                    cause: RefusalCause::Rule(Rejection::AncestorNotOwnedByRoot),
                }]
            })
        );
        owner(&sandbox.floor.join("lib"), 0);
        // A link out of DIR (and out of every reviewed root) is refused.
        let outside = sandbox.image("local/outside/libcuda.so.1", 0o644);
        sandbox.dir("lib/escape");
        symlink(&outside, sandbox.floor.join("lib/escape/libcuda.so.1")).unwrap();
        let escape = Search::driver_root(&sandbox.floor.join("lib/escape")).unwrap();
        assert_eq!(
            summary(review_candidate(
                &escape.candidates[0],
                &escape.roots,
                &escape.floor
            )),
            Err(Rejection::OutsideReviewedRoots)
        );
        // Nothing there: the directory cannot be resolved.
        assert!(Search::driver_root(&sandbox.floor.join("lib/missing")).is_err());
    }

    #[test]
    fn ignores_writable_directories_above_the_floor() {
        let sandbox = Sandbox::new();
        let image = sandbox.image("lib/nvidia/libcuda.so.1", 0o644);
        let above = sandbox.base();
        set_mode(&above, 0o777);
        assert_eq!(sandbox.review(&image), Ok(Some(image)));
        set_mode(&above, 0o755);
    }

    #[test]
    fn refuses_links_that_escape_the_roots_or_the_floor() {
        let sandbox = Sandbox::new();
        // `lib64x` and `libx` share a string prefix with the roots `lib64`
        // and `lib` but are not below them: roots compare by path component.
        for dir in ["lib64x", "libx", "local/outside"] {
            sandbox.dir(dir);
        }
        let escaped = sandbox.base().join("libcuda.so.1");
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
                Err(Rejection::OutsideReviewedRoots),
                "{}",
                target.display()
            );
            symlink(&target, &link).unwrap();
            assert_eq!(
                sandbox.review(&link),
                Err(Rejection::OutsideReviewedRoots),
                "link to {}",
                target.display()
            );
            fs::remove_file(&link).unwrap();
        }
    }

    #[test]
    fn refuses_dangling_looping_and_overlong_link_chains() {
        let sandbox = Sandbox::new();
        let link = sandbox.floor.join("lib/nvidia/libcuda.so.1");
        symlink("nowhere.so", &link).unwrap();
        assert_eq!(sandbox.review(&link), Err(Rejection::Unresolvable));
        fs::remove_file(&link).unwrap();
        symlink("libcuda.so.1", &link).unwrap();
        assert_eq!(sandbox.review(&link), Err(Rejection::Unresolvable));
        fs::remove_file(&link).unwrap();
        // A chain one longer than the limit.
        sandbox.image("lib/nvidia/end", 0o644);
        let mut next = String::from("end");
        for index in 0..MAX_LINKS {
            let name = format!("hop{index}");
            symlink(&next, sandbox.floor.join("lib/nvidia").join(&name)).unwrap();
            next = name;
        }
        symlink(&next, &link).unwrap();
        assert_eq!(sandbox.review(&link), Err(Rejection::Unresolvable));
        let within = sandbox.floor.join("lib/nvidia").join(&next);
        assert!(sandbox.review(&within).is_ok());
    }

    #[test]
    fn refuses_every_kind_of_non_regular_file_without_blocking() {
        let sandbox = Sandbox::new();
        let path = sandbox.floor.join("lib/nvidia/libcuda.so.1");
        // A FIFO with no writer: opening it for reading would block forever.
        mkfifo(&path);
        assert_eq!(sandbox.review(&path), Err(Rejection::NotRegularFile));
        fs::remove_file(&path).unwrap();
        let socket = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert_eq!(sandbox.review(&path), Err(Rejection::NotRegularFile));
        drop(socket);
        fs::remove_file(&path).unwrap();
        fs::create_dir(&path).unwrap();
        set_mode(&path, 0o755);
        assert_eq!(sandbox.review(&path), Err(Rejection::NotRegularFile));
        fs::remove_dir(&path).unwrap();
        symlink("/dev/null", &path).unwrap();
        // /dev/null is outside the roots; a device inside them is refused too.
        assert_eq!(sandbox.review(&path), Err(Rejection::OutsideReviewedRoots));
        fs::remove_file(&path).unwrap();
        let device = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path; makedev(1, 3) is /dev/null's number.
        let made =
            unsafe { libc::mknod(device.as_ptr(), libc::S_IFCHR | 0o644, libc::makedev(1, 3)) };
        assert_eq!(made, 0);
        assert_eq!(sandbox.review(&path), Err(Rejection::NotRegularFile));
    }

    #[test]
    fn the_root_itself_is_not_an_image() {
        let sandbox = Sandbox::new();
        let root = sandbox.floor.join("lib");
        assert_eq!(sandbox.review(&root), Err(Rejection::NotRegularFile));
        assert_eq!(
            sandbox.review(Path::new("lib/nvidia/libcuda.so.1")),
            Err(Rejection::Unresolvable)
        );
    }

    #[test]
    fn search_reports_not_found_only_when_nothing_exists() {
        let sandbox = Sandbox::new();
        let candidates = vec![
            sandbox.floor.join("lib/wsl/libcuda.so.1"),
            sandbox.floor.join("lib/nvidia/libcuda.so.1"),
        ];
        let open_any = |image: &ReviewedImage| Ok::<_, String>(image.path().to_path_buf());
        let not_found =
            open_first_accepted(&candidates, &sandbox.roots(), &sandbox.floor, open_any);
        let searched = vec![
            sandbox.floor.join("lib/wsl"),
            sandbox.floor.join("lib/nvidia"),
        ];
        assert_eq!(not_found, Err(LoadError::DriverNotFound { searched }));
        // The text says where the loader looked, in order.
        assert_eq!(
            format!("{:?}", not_found.unwrap_err()),
            format!(
                "LIBCUDA_SO_NOT_FOUND: no libcuda.so.1 in {} or {}",
                sandbox.floor.join("lib/wsl").display(),
                sandbox.floor.join("lib/nvidia").display()
            )
        );
        sandbox.image("lib/nvidia/libcuda.so.1", 0o666);
        let refused = open_first_accepted(&candidates, &sandbox.roots(), &sandbox.floor, open_any);
        assert_eq!(
            refused,
            Err(LoadError::DriverLoadFailed {
                refusals: vec![Refusal {
                    candidate: candidates[1].clone(),
                    cause: RefusalCause::Rule(Rejection::ImageWritableByOthers),
                }]
            })
        );
        let error = refused.unwrap_err();
        assert_eq!(error.refusing_rules(), ["mode"]);
        // The text names the code, the candidate and the rule, for a person.
        let text = error.to_string();
        let refused_line = format!(
            "refused {}: rule `mode`: the image is writable by group or others",
            candidates[1].display()
        );
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "LIBCUDA_SO_LOAD_FAILED: a libcuda.so.1 exists, but none passed review and loaded",
                refused_line.as_str(),
            ]
        );
    }

    #[test]
    fn search_tries_the_next_candidate_after_any_failure() {
        let sandbox = Sandbox::new();
        sandbox.dir("lib/first");
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
        let opened = open_first_accepted(&candidates, &sandbox.roots(), &sandbox.floor, |image| {
            if image.path() == first {
                Err(String::from("invalid ELF header"))
            } else {
                Ok(image.path().to_path_buf())
            }
        });
        assert_eq!(opened, Ok(second.clone()));
        let none_open = open_first_accepted(&candidates, &sandbox.roots(), &sandbox.floor, |_| {
            Err::<PathBuf, _>(String::from("invalid ELF header"))
        });
        let refusal = |candidate: &PathBuf, cause| Refusal {
            candidate: candidate.clone(),
            cause,
        };
        let not_loadable = || RefusalCause::NotLoadable {
            reason: String::from("invalid ELF header"),
        };
        assert_eq!(
            none_open,
            Err(LoadError::DriverLoadFailed {
                refusals: vec![
                    refusal(
                        &candidates[0],
                        RefusalCause::Rule(Rejection::ImageWritableByOthers)
                    ),
                    refusal(&first, not_loadable()),
                    refusal(&second, not_loadable()),
                ]
            })
        );
    }

    #[test]
    fn every_candidate_lies_below_a_root_but_the_nixos_link() {
        let x86_64 = candidate_paths(LINUX_X86_64_CANDIDATE_DIRS);
        let aarch64 = candidate_paths(LINUX_AARCH64_CANDIDATE_DIRS);
        let roots = reviewed_roots();
        // Every candidate lies below a root, except NixOS's, which is a link
        // into the store.
        for candidate in x86_64.iter().chain(&aarch64) {
            let below_a_root = roots.iter().any(|root| candidate.starts_with(root));
            assert_eq!(
                below_a_root,
                !candidate.starts_with("/run/opengl-driver"),
                "{}",
                candidate.display()
            );
        }
    }
}
