//! `containment` in a process of its own (an integration test binary with one
//! test): a `setsid` grandchild and a deeper double-forked one come back to
//! the subreaper and are killed and reaped by the sweep, from the test
//! harness's second thread (so every thread's children are looked at).

#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rextio_cuda_probe::containment::{self, SWEEP_DEADLINE};

fn children() -> Vec<String> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let text = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        found.extend(text.split_whitespace().map(str::to_owned));
    }
    found
}

/// The pid a descendant wrote, once it has written it (bounded wait for a state).
fn pid_in(file: &Path) -> i32 {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(file) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no pid in {file:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn escaped_descendants_are_killed_and_reaped() {
    containment::become_subreaper();
    let directory = std::env::temp_dir().join(format!("rextio-containment-{}", std::process::id()));
    std::fs::create_dir_all(&directory).unwrap();
    let (near, far) = (directory.join("near"), directory.join("far"));
    // Near: setsid, then sleeps. Far: setsid, forks again, the middle exits.
    let script = format!(
        "setsid sh -c 'echo $$ > {near}.tmp; mv {near}.tmp {near}; exec sleep 300' \
         </dev/null >/dev/null 2>&1 &\n\
         setsid sh -c '(sh -c \"echo \\$\\$ > {far}.tmp; mv {far}.tmp {far}; exec sleep 300\" &)' \
         </dev/null >/dev/null 2>&1 &\n",
        near = near.display(),
        far = far.display(),
    );
    let status = Command::new("/bin/sh")
        .arg("-c")
        .arg(&script)
        .status()
        .unwrap();
    assert!(status.success());
    let pids = [pid_in(&near), pid_in(&far)];
    assert!(containment::sweep(Instant::now() + SWEEP_DEADLINE));
    assert_eq!(children(), Vec::<String>::new());
    for pid in pids {
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "descendant {pid} outlived the sweep");
    }
    std::fs::remove_dir_all(&directory).unwrap();
}
