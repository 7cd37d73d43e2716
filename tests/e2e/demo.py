"""The whole chain on the simulated driver, for a newcomer without a GPU.

`cargo xtask demo` builds what it needs and runs it with
``target/venv-demo/bin/python``; after `cargo xtask setup`,
``target/venv/bin/python tests/e2e/demo.py`` runs it too (as root: private
mount namespaces), and tests/e2e/test_demo.py checks it. Shows the
probe's report, the preflight through Rextio Core and the redacted plan, the
lifetime smoke with the driver's call log, and the packaged runtime source
built into a sample project. Each step says what it proves and what it does
not: no step touches a real GPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sim_namespace import (
    TWO_DEVICES,
    SimulatedHost,
    built_binaries,
    namespace_tools_or_fail,
    preflight_argv,
)

SAMPLE_MANIFEST = """[package]
name = "rextio-demo-sample"
version = "0.1.0"
edition = "2021"
publish = false

# Its own workspace: this sample is not a member of the repository's.
[workspace]

[dependencies]
rextio-cuda-runtime = { path = "generated/device-providers/rextio-device-cuda/rextio-cuda-runtime" }
"""

SAMPLE_MAIN = """//! Uses the runtime's lifetime API; running it needs a loaded driver table.
use std::rc::Rc;

use rextio_cuda_runtime::{Context, CudaError, DriverApi};

#[allow(dead_code)]
fn smoke(api: Rc<DriverApi>, device: i32) -> Result<(), CudaError> {
    let context = Context::create(api, device)?;
    let stream = context.create_stream()?;
    let mut allocation = context.allocate(4096)?;
    stream.synchronize()?;
    stream.fill(&mut allocation, 0)?;
    stream.copy_to_device(&mut allocation, 0, &[1; 4096])?;
    let mut back = vec![0; 4096];
    stream.copy_from_device(&allocation, 0, &mut back)?;
    allocation.close()?;
    stream.close()?;
    context.close()
}

fn main() {
    println!("   sample built against the packaged rextio-cuda-runtime (compiled, not run)");
}
"""


# Every line printed fits a terminal of this width.
COLUMNS = 100


def wrapped(text: str, first: str, rest: str) -> str:
    return textwrap.fill(
        text, COLUMNS, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
    )


def step(title: str, proves: str, does_not_prove: str) -> None:
    print(f"\n== {title}")
    print(wrapped(proves, "   proves:         ", " " * 19))
    print(wrapped(does_not_prove, "   does not prove: ", " " * 19))


def show(what: str, returncode: int, stdout: str) -> None:
    """A JSON record the binary printed (one line), laid out a field a line."""
    record = json.dumps(json.loads(stdout), indent=2).replace("\n", "\n   ")
    print(f"   {what} (exit {returncode}):\n   {record}")


def run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, check=True)


def main() -> int:
    native = built_binaries()
    with tempfile.TemporaryDirectory(prefix="rextio-demo-") as scratch:
        work = Path(scratch)
        host = SimulatedHost(native, namespace_tools_or_fail(), work)
        step(
            "1. the probe on this host (no NVIDIA driver here)",
            "with no libcuda.so.1 at any reviewed path the probe still prints one schema-1 "
            "report, exits 0 and names the reason",
            "anything about a machine that has a driver",
        )
        bare = subprocess.run([native.probe], capture_output=True, text=True, timeout=60)
        show("probe", bare.returncode, bare.stdout)

        step(
            "2. the probe beside the simulated driver (private mount namespace)",
            "the reviewed loader accepts an owner-only image at /usr/local/nvidia/lib64, "
            "resolves the inventory symbols and reports every device",
            "that a real NVIDIA driver answers the same way; the devices are simulated",
        )
        probed = host.run(TWO_DEVICES, [native.probe])
        show("probe", probed.returncode, probed.stdout)

        step(
            "3. the provider's preflight through Rextio Core, and the redacted plan",
            "the installed wheel's entry point is found by Core, runs the real probe, checks "
            "device 0 and sm_80, and the plan's records carry no path",
            "that code built from the plan runs on a GPU (support_claim stays false)",
        )
        preflight = host.run(TWO_DEVICES, preflight_argv(sys.executable, native.probe))
        if preflight.returncode != 0:
            print(f"the preflight was not ready: {preflight.stdout}{preflight.stderr}")
            return 1
        plan = json.loads(preflight.stdout)
        ready = plan["preflight"]
        print(f"   preflight status: {ready['status']} (support_claim: {ready['support_claim']})")
        for observation in ready["observations"]:
            print(f"     {observation['key']} = {observation['value']}")
        for section in ("options", "lock", "lowering_authorization"):
            text = json.dumps(plan[section], indent=2).replace("\n", "\n   ")
            print(f"   plan.{section}: {text}")

        step(
            "4. the lifetime smoke (runtime crate through the reviewed loader)",
            "context, dedicated stream and a 4096-byte allocation are created, synchronized "
            "and released exactly once, children first, every push matched by a pop; "
            "4096 bytes written to the (simulated) device memory come back intact",
            "that device memory or a stream works on real hardware; no kernel runs",
        )
        smoke = host.run(TWO_DEVICES, [native.smoke, "--device", "0"])
        show("smoke", smoke.returncode, smoke.stdout)
        print("   simulated driver call log:")
        print("".join(f"{wrapped(line, ' ' * 5, ' ' * 9)}\n" for line in smoke.calls), end="")
        if smoke.returncode != 0:
            return 1

        step(
            "5. the packaged runtime source, materialized into a sample project and built",
            "the wheel carries a verified, self-contained rextio-cuda-runtime that builds "
            "offline with no link to cuda",
            "anything at run time: the sample is only compiled",
        )
        project = work / "sample-project"
        (project / "src").mkdir(parents=True)
        command = [sys.executable, "-m", "rextio_device_cuda", "runtime-source", "--into"]
        installed = run([*command, str(project)]).stdout
        print("".join(f"   {line}\n" for line in installed.splitlines()), end="")
        (project / "Cargo.toml").write_text(SAMPLE_MANIFEST, encoding="utf-8")
        (project / "src" / "main.rs").write_text(SAMPLE_MAIN, encoding="utf-8")
        cargo = os.environ.get("CARGO") or shutil.which("cargo") or "cargo"
        run([cargo, "build", "--offline", "--quiet", "--target-dir", "target"], cwd=project)
        print(run([str(project / "target" / "debug" / "rextio-demo-sample")]).stdout, end="")
    print("\nDone. Nothing here ran on a GPU: `python -m rextio_device_cuda validate --sm sm_NN`")
    print("on an NVIDIA host exercises a real driver (and still certifies nothing).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
