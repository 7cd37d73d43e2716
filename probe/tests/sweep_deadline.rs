//! The sweep never runs past its deadline, and says when something survived
//! (fail closed; docs/interfaces.md, Probe runner). In a process of its own (an integration test
//! binary with one test): the sweep ends every descendant of the process.

#![cfg(target_os = "linux")]

use std::process::Command;
use std::time::Instant;

use rextio_cuda_probe::containment::{self, SWEEP_DEADLINE};

fn is_running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
    !matches!(
        state.and_then(|rest| rest.chars().next()),
        Some('Z' | 'X') | None
    )
}

#[test]
fn a_sweep_past_its_deadline_reports_the_survivor_and_a_later_one_ends_it() {
    containment::become_subreaper();
    // The sweep reaps it (that is what is tested), not `wait`.
    #[allow(clippy::zombie_processes)]
    let child = Command::new("sleep").arg("300").spawn().unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    // The deadline has passed before the first round: nothing is killed,
    // and the sweep says a descendant lives.
    assert!(!containment::sweep(Instant::now()));
    assert!(is_running(pid));
    // Given its time, the sweep ends it and reaps it.
    assert!(containment::sweep(Instant::now() + SWEEP_DEADLINE));
    assert!(!is_running(pid));
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}
