//! CPython 3.14 from Debian's packages (docs/interfaces.md, "Python
//! versions"): this machine image carries 3.11 to 3.13, so 3.14 is Debian
//! sid's `python3.14`, in a chroot that `mmdebstrap` (installed with apt-get
//! when absent) makes once under `target/debian-sid/` from the machine's own
//! Debian archive.
//!
//! A command runs there as root in a private mount namespace, which ends
//! with it: the repository at its own path (so `target/test-paths.json`
//! resolves), the host's toolchains the tests call (cargo's and rustup's
//! homes; pyenv's, whose interpreters the build environments in `target/`
//! link to) and the host's resolver, CA bundle and pip configuration, so the
//! registry is reached as from the host. Nothing outside the repository is
//! written but what the tests write on the host too (cargo's caches).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::paths::{at, repo_root, target_dir};
use crate::{apt, process, Result};

/// Debian's suite that carries `python3.14`.
const SUITE: &str = "sid";
/// The chroot's packages beyond Debian's essential set: the interpreter
/// and its `venv` (ensurepip; the tests make virtual environments), `mount`
/// (the tests' private namespaces) and the C compiler that the tests and
/// cargo call as `cc`.
const PACKAGES: [&str; 5] = ["python3.14", "python3.14-venv", "mount", "gcc", "libc6-dev"];
/// The interpreter, inside the chroot.
pub const PYTHON: &str = "/usr/bin/python3.14";

/// The script that sets up the mounts, then runs the command in the chroot.
const ENTER: &str = "xtask/debian-python-enter.sh";

/// The chroot's root directory, made (again) when absent or made from
/// another recipe (suite, archive, packages).
pub fn root() -> Result<PathBuf> {
    let dir = target_dir().join("debian-sid");
    let (rootfs, recipe_file) = (dir.join("rootfs"), dir.join("recipe"));
    let archive = apt::machine_archive_uri()?;
    let recipe = format!("{SUITE} {archive} {}\n", PACKAGES.join(","));
    let python = rootfs.join(PYTHON.trim_start_matches('/'));
    if std::fs::read_to_string(&recipe_file).ok().as_deref() == Some(&recipe) && python.is_file() {
        return Ok(rootfs);
    }
    ensure_mmdebstrap()?;
    let partial = dir.join("rootfs.partial");
    let _ = std::fs::remove_file(&recipe_file);
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&dir).map_err(at(&dir))?;
    process::run(
        Command::new("mmdebstrap")
            .args(["--quiet", "--variant=essential"])
            .arg(format!("--include={}", PACKAGES.join(",")))
            // The archive's sid Release file is past its Valid-Until date; apt
            // refuses it without this.
            .arg("--aptopt=Acquire::Check-Valid-Until \"false\"")
            .arg("--aptopt=Acquire::Languages \"none\"")
            .arg(SUITE)
            .arg(&partial)
            .arg(&archive),
    )?;
    let _ = std::fs::remove_dir_all(&rootfs);
    std::fs::rename(&partial, &rootfs).map_err(at(&rootfs))?;
    std::fs::write(&recipe_file, recipe).map_err(at(&recipe_file))?;
    Ok(rootfs)
}

/// mmdebstrap, installed from the machine's archive when absent.
fn ensure_mmdebstrap() -> Result<()> {
    if process::output(Command::new("mmdebstrap").arg("--version")).is_ok() {
        return Ok(());
    }
    process::run(Command::new("apt-get").args(["-q", "update"]))?;
    process::run(
        Command::new("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args([
                "-q",
                "-y",
                "install",
                "--no-install-recommends",
                "mmdebstrap",
            ]),
    )
}

/// `command` as it runs in the chroot: the same program, arguments,
/// environment and directory (which must lie in the repository).
pub fn inside(command: &Command) -> Result<Command> {
    let root = root()?;
    let dir = match command.get_current_dir() {
        Some(dir) => dir.to_path_buf(),
        None => repo_root(),
    };
    let mut shared: Vec<(&str, PathBuf)> = vec![("rw", repo_root())];
    for (mode, path) in host_paths() {
        if path.exists() {
            shared.push((mode, path));
        }
    }
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["--mount", "--propagation", "private", "--", "sh"])
        .arg(repo_root().join(ENTER))
        .arg(&root)
        .arg(&dir);
    for (mode, path) in shared {
        wrapped.arg(mode).arg(path);
    }
    wrapped
        .arg("--")
        .arg(command.get_program())
        .args(command.get_args());
    for (name, value) in command.get_envs() {
        match value {
            Some(value) => wrapped.env(name, value),
            None => wrapped.env_remove(name),
        };
    }
    Ok(wrapped)
}

/// The host's paths the suite needs in the chroot, each with its mode.
fn host_paths() -> Vec<(&'static str, PathBuf)> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let from_env = |name: &str, default: &str| -> PathBuf {
        std::env::var_os(name)
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(default))
    };
    let certificates: OsString = std::env::var_os("SSL_CERT_FILE")
        .unwrap_or_else(|| "/etc/ssl/certs/ca-certificates.crt".into());
    let mut paths = vec![
        ("rw", from_env("CARGO_HOME", ".cargo")),
        ("rw", from_env("RUSTUP_HOME", ".rustup")),
        ("ro", from_env("PYENV_ROOT", ".pyenv")),
        ("ro", PathBuf::from("/etc/resolv.conf")),
        ("ro", PathBuf::from("/etc/hosts")),
        ("ro", PathBuf::from(certificates)),
        ("ro", PathBuf::from("/etc/pip.conf")),
    ];
    // pip's extra wheel directory, when the host names one.
    if let Some(links) = std::env::var_os("PIP_FIND_LINKS") {
        let links = PathBuf::from(links);
        if links.is_absolute() && links.is_dir() {
            paths.push(("ro", links));
        }
    }
    paths.retain(|(_, path)| path.is_absolute() && path != Path::new("/"));
    paths
}
