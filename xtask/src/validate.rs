//! `cargo xtask validate-nvidia --sm sm_NN [--device N] [--toolkit-root DIR] [--output FILE]`
//!
//! Manual validation on a trusted NVIDIA host (contract §8): builds the exact
//! local probe and smoke (release, locked), runs the probe, a standalone
//! provider preflight through Rextio Core, and the lifetime smoke, then
//! writes path-free JSON evidence. The evidence always says
//! `support_claim: false`, `kernel_executed: false` and
//! `certification_ready: false`: it shows this host works, it certifies
//! nothing. The command fails (non-zero) unless the preflight is ready and
//! the smoke completes, and says why in one plain sentence.
//!
//! The preflight pins the probe it built (`--probe-sha256`): the evidence
//! records that digest, and the preflight observes it as `probe.sha256`, so
//! the evidence names exactly which probe binary answered.
//!
//! `--dev-build` builds with the dev profile instead (the simulated-driver
//! end-to-end test uses it so nothing is rebuilt); the evidence records the
//! profile, so such evidence cannot pass for a release run.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::generate::spec::{ProviderSpec, PROVIDER_SPEC_PATH};
use crate::native::{self, NativeArtifacts};
use crate::paths::repo_root;
use crate::python_env::venv_program;
use crate::Result;

const USAGE: &str = "usage: cargo xtask validate-nvidia --sm sm_NN [--device N] \
[--toolkit-root DIR] [--output FILE]";
const PROVIDER_MODULE: &str = "rextio_device_cuda";
const EVIDENCE_NAME: &str = "rextio-device-cuda-nvidia-validation";
const EVIDENCE_SCHEMA_VERSION: &str = "1";
/// Core's `DevicePreflightStatus.READY`.
const READY_STATUS: &str = "ready";

/// The facts this command needs, read from the provider spec (never retyped).
pub struct SpecFacts {
    pub max_device_ordinal: u32,
    smoke_complete_status: String,
    /// (os, arch, raw-driver capability id) for every declared target.
    raw_capabilities: Vec<(String, String, String)>,
}

impl SpecFacts {
    pub fn read() -> Result<Self> {
        let path = repo_root().join(PROVIDER_SPEC_PATH);
        let bytes = std::fs::read(&path)
            .map_err(|error| format!("{PROVIDER_SPEC_PATH}: cannot read: {error}"))?;
        let spec = ProviderSpec::parse(&bytes)?;
        let raw_capabilities = spec
            .capabilities
            .iter()
            .filter(|capability| {
                spec.lanes
                    .get(&capability.lane)
                    .is_some_and(|lane| lane.requirement_policy.is_some())
            })
            .filter_map(|capability| {
                let target = spec.probe_targets.get(&capability.target_triple)?;
                Some((
                    target.os.clone(),
                    target.arch.clone(),
                    capability.id.clone(),
                ))
            })
            .collect();
        Ok(Self {
            max_device_ordinal: spec.policy.device_ordinal_max,
            smoke_complete_status: spec.smoke.complete_status,
            raw_capabilities,
        })
    }

    /// The raw-driver capability of the host this command runs on.
    fn host_capability(&self) -> Result<&str> {
        let (os, arch) = (std::env::consts::OS, std::env::consts::ARCH);
        self.raw_capabilities
            .iter()
            .find(|(spec_os, spec_arch, _)| spec_os == os && spec_arch == arch)
            .map(|(_, _, id)| id.as_str())
            .ok_or_else(|| {
                format!(
                    "validate-nvidia runs only on a declared raw-driver target, not {os}/{arch}"
                )
            })
    }
}

/// What the person asked to validate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub sm: String,
    pub device: u32,
    pub toolkit_root: Option<PathBuf>,
    pub output: Option<PathBuf>,
    pub dev_build: bool,
}

pub fn command(args: &[String]) -> Result<()> {
    let facts = SpecFacts::read()?;
    let options = parse_arguments(args, facts.max_device_ordinal)
        .unwrap_or_else(|message| crate::usage_error(&message));
    let capability = facts.host_capability()?;
    let native = native::build(!options.dev_build)?;
    let python = provider_python()?;
    let evidence = collect_evidence(&facts, &native, &python, capability, &options)?;
    let text = render_path_free(&evidence, &forbidden_strings(&native, &options))?;
    println!("{text}");
    if let Some(output) = &options.output {
        std::fs::write(output, format!("{text}\n"))
            .map_err(|error| format!("cannot write {}: {error}", output.display()))?;
        eprintln!("evidence written to {}", output.display());
    }
    verdict(&evidence, &python)
}

/// Parses the command's arguments; bad input is a usage error, never a panic.
pub fn parse_arguments(args: &[String], max_device_ordinal: u32) -> Result<Options> {
    let mut sm = None;
    let mut device = None;
    let mut toolkit_root = None;
    let mut output = None;
    let mut dev_build = false;
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let mut value = || {
            rest.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--sm" => sm = Some(value()?),
            "--device" => device = Some(value()?),
            "--toolkit-root" => toolkit_root = Some(PathBuf::from(value()?)),
            "--output" => output = Some(PathBuf::from(value()?)),
            "--dev-build" => dev_build = true,
            other => return Err(format!("unknown argument `{other}`\n{USAGE}")),
        }
    }
    let sm = sm.ok_or_else(|| format!("--sm is required\n{USAGE}"))?;
    if !is_sm(&sm) {
        return Err(format!(
            "--sm must be sm_ followed by two or three digits (got `{sm}`)"
        ));
    }
    let device = match device {
        None => 0,
        Some(text) => parse_ordinal(&text, max_device_ordinal).ok_or_else(|| {
            format!("--device must be a number from 0 to {max_device_ordinal} (got `{text}`)")
        })?,
    };
    Ok(Options {
        sm,
        device,
        toolkit_root,
        output,
        dev_build,
    })
}

fn is_sm(text: &str) -> bool {
    text.strip_prefix("sm_").is_some_and(|digits| {
        (2..=3).contains(&digits.len()) && digits.bytes().all(|byte| byte.is_ascii_digit())
    })
}

fn parse_ordinal(text: &str, max_device_ordinal: u32) -> Option<u32> {
    if text.is_empty() || text.len() > 4 || !text.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse()
        .ok()
        .filter(|ordinal| *ordinal <= max_device_ordinal)
}

/// The project venv's python, with the provider installed.
fn provider_python() -> Result<PathBuf> {
    let python = venv_program("python");
    let importable = python.is_file()
        && run_clean(Command::new(&python).args(["-c", &format!("import {PROVIDER_MODULE}")]))
            .is_ok_and(|output| output.status.success());
    if importable {
        Ok(python)
    } else {
        Err(format!(
            "the provider is not installed in the project venv ({}); run `cargo xtask test` \
             once (it creates target/venv and installs the locally built wheel), then retry",
            python.display()
        ))
    }
}

fn collect_evidence(
    facts: &SpecFacts,
    native: &NativeArtifacts,
    python: &Path,
    capability: &str,
    options: &Options,
) -> Result<Value> {
    let device = options.device.to_string();
    let probe_bytes = std::fs::read(&native.probe)
        .map_err(|error| format!("cannot read the built probe: {error}"))?;
    let probe_sha256 = crate::generate::sha256_hex(&probe_bytes);
    let probe_report = json_line(&run_clean(&mut bare(&native.probe))?, "probe")?;

    let mut preflight_command = Command::new(python);
    preflight_command
        .args([
            "-m",
            PROVIDER_MODULE,
            "preflight",
            "--capability",
            capability,
            "--probe",
        ])
        .arg(&native.probe)
        .args(["--device", &device, "--sm", &options.sm, "--json"])
        .args(["--probe-sha256", &probe_sha256]);
    if let Some(root) = &options.toolkit_root {
        preflight_command.arg("--toolkit-root").arg(root);
    }
    let preflight_output = run_clean(&mut preflight_command)?;
    let preflight = preflight_summary(&preflight_output)?;

    let smoke_output = run_clean(bare(&native.smoke).args(["--device", &device]))?;
    let smoke = json_line(&smoke_output, "smoke")?;

    let ready = preflight["status"] == READY_STATUS;
    let smoke_complete =
        smoke["status"] == facts.smoke_complete_status.as_str() && smoke_output.status.success();
    let reason_code = if !ready {
        preflight["reason_code"].clone()
    } else if !smoke_complete {
        smoke["reason_code"].clone()
    } else {
        Value::Null
    };
    Ok(json!({
        "evidence": EVIDENCE_NAME,
        "schema_version": EVIDENCE_SCHEMA_VERSION,
        "support_claim": false,
        "kernel_executed": false,
        "certification_ready": false,
        "build_profile": if options.dev_build { "dev" } else { "release" },
        "capability": capability,
        "selected_device": options.device,
        "selected_sm": options.sm,
        "toolkit_root_configured": options.toolkit_root.is_some(),
        "probe_sha256": probe_sha256,
        "validated": ready && smoke_complete,
        "reason_code": reason_code,
        "probe_report": probe_report,
        "preflight": preflight,
        "smoke": smoke,
    }))
}

/// A native binary with the same empty environment the provider gives the
/// probe (on Windows only `SYSTEMROOT` and `WINDIR`).
fn bare(program: &Path) -> Command {
    let mut command = Command::new(program);
    command.env_clear();
    if cfg!(windows) {
        for name in ["SYSTEMROOT", "WINDIR"] {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
    }
    command
}

/// How long any one child (probe, preflight, smoke, explain) may run: the
/// probe's own budget is 10 s (contract §5), Core's import a few seconds.
const CHILD_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs a command with stdin closed, captures its output, and kills it (and
/// its process group) if it runs past [`CHILD_TIMEOUT`].
fn run_clean(command: &mut Command) -> Result<Output> {
    run_bounded(command.current_dir(repo_root()), CHILD_TIMEOUT)
}

/// Runs `command` to completion or to `timeout`, whichever comes first.
fn run_bounded(command: &mut Command, timeout: Duration) -> Result<Output> {
    let shown = crate::process::describe(command);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    {
        // Its own process group, so a grandchild holding the pipes is
        // killed with it.
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    let mut child = command
        .spawn()
        .map_err(|error| format!("cannot run {shown}: {error}"))?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                kill_group(&mut child);
                return Err(format!(
                    "{shown} ran longer than {} s and was killed",
                    timeout.as_secs_f32()
                ));
            }
            Err(error) => {
                kill_group(&mut child);
                return Err(format!("cannot wait for {shown}: {error}"));
            }
        }
    };
    // The child is gone; a grandchild that kept the pipes open (its group
    // still exists then) is bounded by the same deadline.
    while !(stdout.is_finished() && stderr.is_finished()) {
        if Instant::now() >= deadline {
            kill_group(&mut child);
            return Err(format!(
                "{shown} left a process holding its output past {} s; it was killed",
                timeout.as_secs_f32()
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// Reads a pipe to its end on a thread.
fn drain(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Kills the child's process group (Unix) or the child, then reaps it.
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    {
        // `kill -KILL -PGID`: the group the child leads.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", child.id())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn json_line(output: &Output, what: &str) -> Result<Value> {
    serde_json::from_slice(&output.stdout).map_err(|error| {
        format!(
            "the {what} printed no JSON record ({error}); stderr: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )
    })
}

/// Status, reason code and observations of the preflight, from the CLI's
/// ready plan (exit 0) or refusal (exit 1); nothing else of the plan.
fn preflight_summary(output: &Output) -> Result<Value> {
    let printed = json_line(output, "provider preflight")?;
    match output.status.code() {
        Some(0) => {
            let preflight = &printed["preflight"];
            let observations: Map<String, Value> = preflight["observations"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|item| Some((item["key"].as_str()?.to_string(), item["value"].clone())))
                .collect();
            Ok(json!({
                "status": preflight["status"],
                "reason_code": preflight["reason_codes"].get(0).cloned().unwrap_or(Value::Null),
                "observations": observations,
            }))
        }
        Some(1) => Ok(json!({
            "status": printed["status"],
            "reason_code": printed["reason_code"],
            "observations": {},
        })),
        _ => Err(format!(
            "the provider preflight refused its input: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )),
    }
}

/// Strings that must never appear in evidence: every local path involved.
fn forbidden_strings(native: &NativeArtifacts, options: &Options) -> Vec<String> {
    let mut paths = vec![repo_root(), native.probe.clone(), native.smoke.clone()];
    paths.extend(options.toolkit_root.clone());
    paths.extend(std::env::var_os("HOME").map(PathBuf::from));
    paths
        .iter()
        .map(|path| path.to_string_lossy().into_owned())
        .filter(|text| text.len() > 1)
        .collect()
}

/// Pretty JSON, refused if any string looks like a path or names a local one.
pub fn render_path_free(evidence: &Value, forbidden: &[String]) -> Result<String> {
    if let Some(found) = first_path_like(evidence) {
        return Err(format!(
            "refusing to write evidence holding a path-like value: {found:?}"
        ));
    }
    let text = serde_json::to_string_pretty(evidence)
        .map_err(|error| format!("cannot serialize evidence: {error}"))?;
    if let Some(found) = forbidden.iter().find(|path| text.contains(path.as_str())) {
        return Err(format!(
            "refusing to write evidence that names the local path {found}"
        ));
    }
    Ok(text)
}

fn first_path_like(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => {
            let bytes = text.as_bytes();
            let windows_drive = bytes.len() >= 3
                && bytes[0].is_ascii_alphabetic()
                && bytes[1] == b':'
                && matches!(bytes[2], b'\\' | b'/');
            (text.starts_with('/') || text.starts_with('\\') || windows_drive).then(|| text.clone())
        }
        Value::Array(items) => items.iter().find_map(first_path_like),
        Value::Object(map) => map.iter().find_map(|(key, item)| {
            first_path_like(&Value::String(key.clone())).or_else(|| first_path_like(item))
        }),
        _ => None,
    }
}

/// Ok when validated; otherwise the reason code, what it means and what to do.
fn verdict(evidence: &Value, python: &Path) -> Result<()> {
    if evidence["validated"] == true {
        eprintln!(
            "validated: preflight ready and lifetime smoke complete on device {} ({}); \
             no kernel ran and nothing is certified",
            evidence["selected_device"],
            evidence["selected_sm"].as_str().unwrap_or("?")
        );
        return Ok(());
    }
    let code = evidence["reason_code"]
        .as_str()
        .unwrap_or("PROBE_NOT_READY")
        .to_string();
    let explanation =
        run_clean(Command::new(python).args(["-m", PROVIDER_MODULE, "explain", &code]))
            .ok()
            .filter(|output| output.status.success())
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
            .unwrap_or_else(|| code.clone());
    Err(format!("this host is not validated.\n{explanation}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_child_past_its_timeout_is_killed_with_its_grandchildren() {
        // The grandchild keeps stdout open: only killing the group ends this.
        let started = Instant::now();
        let error = run_bounded(
            Command::new("sh").args(["-c", "sleep 300 & echo started; sleep 300"]),
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(
            error.contains("ran longer than 0.3 s and was killed"),
            "{error}"
        );
        // Far below the children's 300 s: they were killed, not waited for.
        assert!(started.elapsed() < Duration::from_secs(200));
    }

    #[cfg(unix)]
    #[test]
    fn a_grandchild_holding_the_output_is_killed_at_the_deadline() {
        let error = run_bounded(
            Command::new("sh").args(["-c", "sleep 300 & echo started"]),
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(
            error.contains("left a process holding its output"),
            "{error}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_child_within_its_timeout_is_captured() {
        let output = run_bounded(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(60),
        )
        .unwrap();
        assert_eq!(output.status.code(), Some(3));
        assert_eq!(
            (output.stdout.as_slice(), output.stderr.as_slice()),
            (&b"out\n"[..], &b"err\n"[..])
        );
    }

    fn strings(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|part| part.to_string()).collect()
    }

    fn parse(parts: &[&str]) -> Result<Options> {
        parse_arguments(
            &strings(parts),
            SpecFacts::read().unwrap().max_device_ordinal,
        )
    }

    #[test]
    fn the_spec_declares_this_host_and_the_contract_ordinal_bound() {
        let facts = SpecFacts::read().unwrap();
        assert_eq!(facts.max_device_ordinal, 1023);
        let expected = match (std::env::consts::OS, std::env::consts::ARCH) {
            ("linux", "x86_64") => "cuda-linux-x86_64",
            ("linux", "aarch64") => "cuda-linux-aarch64",
            _ => "cuda-windows-x86_64",
        };
        assert_eq!(facts.host_capability().unwrap(), expected);
    }

    #[test]
    fn parses_the_documented_arguments() {
        let options = parse(&[
            "--sm",
            "sm_80",
            "--device",
            "3",
            "--toolkit-root",
            "/opt/cuda",
            "--output",
            "e.json",
        ])
        .unwrap();
        assert_eq!(options.sm, "sm_80");
        assert_eq!(options.device, 3);
        assert_eq!(options.toolkit_root, Some(PathBuf::from("/opt/cuda")));
        assert_eq!(options.output, Some(PathBuf::from("e.json")));
        assert!(!options.dev_build);
        assert_eq!(parse(&["--sm", "sm_100"]).unwrap().device, 0);
    }

    #[test]
    fn refuses_bad_arguments() {
        for bad in [
            &[][..],
            &["--sm"][..],
            &["--sm", "80"][..],
            &["--sm", "sm_8"][..],
            &["--sm", "sm_1000"][..],
            &["--sm", "sm_80", "--device", "1024"][..],
            &["--sm", "sm_80", "--device", "-1"][..],
            &["--sm", "sm_80", "--device", "00001"][..],
            &["--sm", "sm_80", "--verbose"][..],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn evidence_with_a_path_is_refused() {
        let forbidden = strings(&["/work/main"]);
        assert!(render_path_free(&json!({"a": "/etc/x"}), &forbidden).is_err());
        assert!(render_path_free(&json!({"a": ["C:\\x"]}), &forbidden).is_err());
        assert!(render_path_free(&json!({"a": "see /work/main/x"}), &forbidden).is_err());
        assert!(render_path_free(&json!({"/k": 1}), &forbidden).is_err());
        let fine = render_path_free(&json!({"sm": "sm_80", "name": "A/B"}), &forbidden).unwrap();
        assert!(fine.contains("A/B"));
    }

    #[cfg(unix)]
    #[test]
    fn preflight_summary_reads_plan_and_refusal() {
        use std::os::unix::process::ExitStatusExt;
        let ready = Output {
            status: std::process::ExitStatus::from_raw(0),
            stdout: br#"{"preflight":{"status":"ready","reason_codes":[],"observations":[{"key":"selected.sm","value":"sm_80"}]},"options":{}}"#.to_vec(),
            stderr: Vec::new(),
        };
        assert_eq!(
            preflight_summary(&ready).unwrap(),
            json!({"status": "ready", "reason_code": null, "observations": {"selected.sm": "sm_80"}})
        );
        let refused = Output {
            status: std::process::ExitStatus::from_raw(1 << 8),
            stdout: br#"{"status":"unavailable","reason_code":"LIBCUDA_SO_NOT_FOUND","support_claim":false}"#.to_vec(),
            stderr: Vec::new(),
        };
        assert_eq!(
            preflight_summary(&refused).unwrap(),
            json!({"status": "unavailable", "reason_code": "LIBCUDA_SO_NOT_FOUND", "observations": {}})
        );
    }
}
