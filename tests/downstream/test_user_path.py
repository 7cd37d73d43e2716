"""The README's "Use it with Rextio" route, run exactly as written.

The files the README shows (marked ``<!-- tested: NAME -->``) are read from
the README itself and written into a project; the ``rextio`` CLI of this venv
(newest Core, with rextio-torch 0.1.3 installed without torch) generates it
inside the simulated-driver namespace, so the provider runs the real probe,
which loads the simulated driver from a reviewed path.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

# The shared helpers live beside their own tests.
from cuda_support import json_strings, json_values
from sim_namespace import (
    DriverLayout,
    SimulatedHost,
    built_binaries,
    namespace_tools_or_fail,
)

README = Path(__file__).resolve().parents[2] / "README.md"
PROBE_PLACEHOLDER = "/absolute/path/to/rextio-cuda-driver-probe"
DIGEST_PLACEHOLDER = "<the 64 hex digits pin-probe printed>"
LOCK = Path(".rextio") / "generated" / "rust" / "device-provider.lock.json"
ONE_A100 = ("driver_version=12040", "device=NVIDIA Simulated A100|8|0")


def readme_files() -> dict[str, str]:
    """Each ``<!-- tested: NAME -->`` block of the README, its indentation removed."""
    text = README.read_text(encoding="utf-8")
    pattern = re.compile(
        r"^(?P<indent>[ \t]*)<!-- tested: (?P<name>[^ ]+) -->\n"
        r"(?P=indent)```[a-z]*\n(?P<body>.*?)^(?P=indent)```$",
        re.MULTILINE | re.DOTALL,
    )
    files: dict[str, str] = {}
    for match in pattern.finditer(text):
        indent = match["indent"]
        lines = match["body"].splitlines()
        files[match["name"]] = "".join(
            f"{line.removeprefix(indent)}\n" if line.strip() else "\n" for line in lines
        )
    return files


@pytest.fixture
def sim_host(tmp_path: Path) -> SimulatedHost:
    return SimulatedHost(built_binaries(), namespace_tools_or_fail(), tmp_path)


def _pin_probe(probe: Path) -> str:
    """The digest line ``pin-probe`` prints, as the README tells the user to run it."""
    done = subprocess.run(
        [sys.executable, "-m", "rextio_device_cuda", "pin-probe", str(probe)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    digest = done.stdout.splitlines()[0]
    assert digest == hashlib.sha256(probe.read_bytes()).hexdigest()
    assert f'probe_sha256 = "{digest}"' in done.stdout
    return digest


# What the README says to change for the TensorFlow route.
TENSORFLOW_EDITS = (
    ('enabled = ["rextio-torch"]', 'enabled = ["rextio-tensorflow"]'),
    (
        'device_capability = "cuda-libtorch-linux-x86_64"',
        'device_capability = "cuda-tensorflow-tfe-linux-x86_64"',
    ),
)
ROUTES = {
    "libtorch": ("app/kernels.py", (), "cuda-libtorch-linux-x86_64", "libtorch"),
    "tensorflow-tfe": (
        "tensorflow/app/kernels.py",
        TENSORFLOW_EDITS,
        "cuda-tensorflow-tfe-linux-x86_64",
        "tensorflow-tfe",
    ),
}


def _project(root: Path, probe: Path, route: str = "libtorch", sm: str | None = None) -> Path:
    files = readme_files()
    assert sorted(files) == ["app/kernels.py", "rextio.toml", "tensorflow/app/kernels.py"]
    kernels, edits, _, _ = ROUTES[route]
    config = files["rextio.toml"]
    assert config.count(PROBE_PLACEHOLDER) == 1
    assert config.count(DIGEST_PLACEHOLDER) == 1
    config = config.replace(PROBE_PLACEHOLDER, str(probe))
    config = config.replace(DIGEST_PLACEHOLDER, _pin_probe(probe))
    for before, after in edits:
        assert config.count(before) == 1, before
        config = config.replace(before, after)
    if sm is not None:
        config = config.replace('sm = "sm_80"', f'sm = "{sm}"')
    root.mkdir()
    (root / "rextio.toml").write_text(config, encoding="utf-8")
    (root / "app").mkdir()
    (root / "app" / "__init__.py").write_text("", encoding="utf-8")
    (root / "app" / "kernels.py").write_text(files[kernels], encoding="utf-8")
    return root


def _rextio() -> Path:
    executable = Path(sys.executable).with_name("rextio")
    assert executable.is_file(), f"no rextio CLI beside {sys.executable}"
    return executable


def test_the_plugin_routes_are_installed_without_their_frameworks() -> None:
    assert metadata.version("rextio-torch") == "0.1.3"
    assert metadata.version("rextio-tensorflow") == "0.1.3"
    assert tuple(int(part) for part in metadata.version("rextio").split(".")) >= (0, 1, 7)
    for framework in ("torch", "tensorflow"):
        with pytest.raises(metadata.PackageNotFoundError):
            metadata.version(framework)


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_the_readme_route_generates_a_path_free_lock(
    route: str, sim_host: SimulatedHost, tmp_path: Path
) -> None:
    probe = sim_host.native.probe.resolve()
    project = _project(tmp_path / "project", probe, route)
    _, _, capability, runtime = ROUTES[route]

    run = sim_host.run(
        DriverLayout(config=ONE_A100), [_rextio(), "generate", "--format", "json", project]
    )

    assert run.returncode == 0, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert "preflight refused" not in run.stderr
    summary = json.loads(run.stdout)
    assert (summary["status"], summary["accepted_native_count"]) == ("generated", 1)
    text = (project / LOCK).read_text(encoding="utf-8")
    lock = json.loads(text)
    plan = lock["device_provider"]
    assert plan["selection"] == {"provider_id": "rextio-device-cuda", "capability_id": capability}
    assert plan["preflight"]["status"] == "ready"
    observations = {item["key"]: item["value"] for item in plan["preflight"]["observations"]}
    assert observations["driver.version"] == "12040"
    assert observations["device.count"] == "1"
    assert (observations["selected.device"], observations["selected.sm"]) == ("0", "sm_80")
    assert observations["probe.sha256"] == hashlib.sha256(probe.read_bytes()).hexdigest()
    [requirement] = plan["artifact_profile"]["device_requirements"]
    assert (requirement["logical_device"], requirement["runtime"]) == ("gpu:0", runtime)
    assert plan["contribution"]["package_references"] == []
    assert all(claim is False for claim in json_values(lock, "support_claim"))
    assert json_values(lock, "support_claim"), "the lock records no support_claim"
    for secret in (str(tmp_path), str(probe)):
        assert secret not in text
    assert [value for value in json_strings(lock) if value.startswith("/")] == []
    # The driver really answered: the probe's calls reached the simulated library.
    assert any(call.startswith("cuDeviceComputeCapability") for call in run.calls), run.calls


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_a_wrong_sm_stops_generation_and_names_the_reason(
    route: str, sim_host: SimulatedHost, tmp_path: Path
) -> None:
    project = _project(tmp_path / "project", sim_host.native.probe.resolve(), route, sm="sm_86")

    run = sim_host.run(DriverLayout(config=ONE_A100), [_rextio(), "generate", project])

    assert run.returncode != 0, run.stdout
    assert "Traceback" not in run.stderr
    assert (
        "rextio-device-cuda preflight refused: CUDA_SM_MISMATCH: "
        in run.stderr
    ), run.stderr
    assert "python -m rextio_device_cuda explain CUDA_SM_MISMATCH" in run.stderr
    assert "failed preflight with status 'unavailable'" in run.stderr
    assert not (project / ".rextio").exists()
