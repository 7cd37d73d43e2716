//! The ownership rules the reviewed loader's walk shares with the pinned
//! probe's interpreter check (the provider's Python): one table of cases
//! (`ownership_cases.json` beside this file), run here through the loader's
//! `review_candidate` and by the Python tests
//! (`tests/python/test_root_owned.py`) through `_root_owned.review`; every
//! case must get its verdict in both. It lives with the probe, which builds
//! on the loader and carries its cross-language checks
//! (`loader_matches_spec.rs`), so the packaged probe source runs it too.
//!
//! The layouts are built as root on a tmpfs in a private mount namespace
//! (the test's own thread unshares its mount namespace), never on the
//! host's own filesystems. Runs as root, as `cargo xtask test` does.
#![cfg(target_os = "linux")]

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{lchown, symlink, PermissionsExt};
use std::path::Path;

use rextio_cuda_loader::reviewed::{review_candidate, Verdict};
use serde_json::Value;

const TABLE: &str = include_str!("ownership_cases.json");

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap()
}

fn mount(source: &str, target: &Path, kind: &str, flags: libc::c_ulong, data: &str) {
    let (source, kind, data) = (
        CString::new(source).unwrap(),
        CString::new(kind).unwrap(),
        CString::new(data).unwrap(),
    );
    let target = c_path(target);
    // SAFETY: every pointer is a NUL-terminated string that lives across the call.
    let done = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            kind.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    assert_eq!(
        done,
        0,
        "mount {}: {}",
        target.to_string_lossy(),
        std::io::Error::last_os_error()
    );
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} in {value}"))
}

fn lay_out(base: &Path, entry: &Value, other_uid: u32) {
    let path = base.join(text(entry, "path"));
    let kind = text(entry, "kind");
    match kind {
        "dir" => fs::create_dir_all(&path).unwrap(),
        "file" => fs::write(&path, b"\x7fELF").unwrap(),
        "symlink" => symlink(text(entry, "target"), &path).unwrap(),
        "hardlink" => fs::hard_link(base.join(text(entry, "target")), &path).unwrap(),
        "fifo" => {
            // SAFETY: a NUL-terminated path that lives across the call.
            assert_eq!(unsafe { libc::mkfifo(c_path(&path).as_ptr(), 0o644) }, 0);
        }
        "chain" => {
            // path -> hop1 -> ... -> hop(links-1) -> target: `links` links in all.
            let links = entry["links"].as_u64().unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let mut names = vec![name.clone()];
            names.extend((1..links).map(|index| format!("{name}.hop{index}")));
            let mut following = names[1..].to_vec();
            following.push(text(entry, "target").to_owned());
            for (link, target) in names.iter().zip(following) {
                symlink(target, path.with_file_name(link)).unwrap();
            }
        }
        other => panic!("unknown layout kind {other}"),
    }
    if let (Some(mode), false) = (entry["mode"].as_str(), kind == "symlink") {
        let mode = u32::from_str_radix(mode, 8).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
    }
    let owner = if entry["owner"].as_str() == Some("other") {
        other_uid
    } else {
        0
    };
    lchown(&path, Some(owner), Some(owner)).unwrap();
}

fn verdict(base: &Path, case: &Value, other_uid: u32) -> String {
    for dir in ["", "usr", "usr/lib", "usr/lib/nvidia"] {
        fs::create_dir_all(base.join(dir)).unwrap();
        fs::set_permissions(base.join(dir), fs::Permissions::from_mode(0o755)).unwrap();
    }
    for entry in case["layout"].as_array().unwrap() {
        lay_out(base, entry, other_uid);
    }
    let floor = base.join("usr");
    if case["read_only"].as_bool() == Some(true) {
        let source = floor.to_str().unwrap();
        mount(source, &floor, "", libc::MS_BIND, "");
        let read_only = libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY;
        mount(source, &floor, "", read_only, "");
    }
    let roots = [floor.join("lib"), floor.join("lib64")];
    match review_candidate(&base.join(text(case, "candidate")), &roots, &floor) {
        Verdict::Absent => "absent".to_owned(),
        Verdict::Rejected(rejection) => rejection.rule().to_owned(),
        Verdict::Accepted(_) => "accepted".to_owned(),
    }
}

#[test]
fn every_shared_ownership_case_gets_its_verdict() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the loader tests run as root"
    );
    let table: Value = serde_json::from_str(TABLE).unwrap();
    let other_uid = u32::try_from(table["other_uid"].as_u64().unwrap()).unwrap();
    let cases = table["cases"].as_array().unwrap().clone();
    let mount_point = fs::canonicalize(std::env::temp_dir())
        .unwrap()
        .join(format!("rextio-ownership-{}", std::process::id()));
    fs::create_dir(&mount_point).unwrap();
    fs::set_permissions(&mount_point, fs::Permissions::from_mode(0o755)).unwrap();
    let point = mount_point.clone();
    // A thread of its own, so that only it leaves the host's mount namespace.
    let verdicts = std::thread::spawn(move || -> Vec<(String, String, String)> {
        // SAFETY: plain syscalls on this thread's own mount namespace.
        unsafe {
            assert_eq!(libc::unshare(libc::CLONE_NEWNS), 0);
        }
        mount("", Path::new("/"), "", libc::MS_REC | libc::MS_PRIVATE, "");
        let mut verdicts = Vec::new();
        for case in &cases {
            mount("tmpfs", &point, "tmpfs", 0, "mode=0755");
            let got = verdict(&point.join("base"), case, other_uid);
            // SAFETY: a NUL-terminated path; MNT_DETACH takes every mount below it too.
            assert_eq!(
                unsafe { libc::umount2(c_path(&point).as_ptr(), libc::MNT_DETACH) },
                0
            );
            verdicts.push((
                text(case, "name").to_owned(),
                got,
                text(case, "verdict").to_owned(),
            ));
        }
        verdicts
    })
    .join();
    fs::remove_dir(&mount_point).unwrap();
    let verdicts = verdicts.unwrap();
    let wrong: Vec<_> = verdicts
        .iter()
        .filter(|(_, got, want)| got != want)
        .collect();
    assert!(wrong.is_empty(), "cases whose verdict differs: {wrong:?}");
    // Every verdict the table knows is reached.
    let mut kinds: Vec<&str> = verdicts.iter().map(|(_, got, _)| got.as_str()).collect();
    kinds.sort_unstable();
    kinds.dedup();
    let all = [
        "absent",
        "accepted",
        "links",
        "mode",
        "owner",
        "regular-file",
        "resolution",
        "writable-directory",
    ];
    assert_eq!(kinds, all);
}
