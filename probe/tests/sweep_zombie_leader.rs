//! A descendant whose main thread alone has exited (its leader shows `Z`)
//! while another thread runs is alive to the sweep: past the deadline the
//! sweep reports it, and given its time it ends the whole thread group. In
//! a process of its own (an integration test binary with one test).

#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rextio_cuda_probe::containment::{self, SWEEP_DEADLINE};

/// Starts a thread that sleeps, then ends only the main thread (the raw
/// `exit` system call, not `exit_group`).
const ZOMBIE_LEADER: &str = "\
import ctypes, os, threading, time
SYS_EXIT = {'x86_64': 60, 'aarch64': 93}[os.uname().machine]
threading.Thread(target=lambda: time.sleep(300)).start()
ctypes.CDLL(None).syscall(SYS_EXIT, 0)
";

fn state_of(stat_path: &Path) -> Option<char> {
    let stat = std::fs::read_to_string(stat_path).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.trim_start().chars().next()
}

/// The states of every thread of `pid`.
fn thread_states(pid: u32) -> Vec<char> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| state_of(&task.path().join("stat")))
        .collect()
}

#[test]
fn a_zombie_leader_with_a_running_thread_is_alive_to_the_sweep() {
    containment::become_subreaper();
    // The sweep reaps it (that is what is tested), not `wait`.
    #[allow(clippy::zombie_processes)]
    let child = Command::new("python3")
        .args(["-c", ZOMBIE_LEADER])
        .spawn()
        .unwrap();
    let pid = child.id();
    // A state, waited for within a generous bound: the leader is a zombie
    // and another thread runs.
    let started = Instant::now();
    loop {
        let leader = state_of(Path::new(&format!("/proc/{pid}/stat")));
        let live = thread_states(pid).iter().any(|state| *state != 'Z');
        if leader == Some('Z') && live {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no zombie leader with a live thread: {leader:?} {:?}",
            thread_states(pid)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Past the deadline nothing is killed, and the live thread is reported.
    assert!(!containment::sweep(Instant::now()));
    // Given its time, the sweep ends the thread group and reaps it.
    assert!(containment::sweep(Instant::now() + SWEEP_DEADLINE));
    assert_eq!(thread_states(pid), Vec::<char>::new());
}
