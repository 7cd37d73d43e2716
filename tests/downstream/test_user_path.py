"""The README's "Use it with Rextio" route, run exactly as written.

The commands and files the README shows (marked ``<!-- tested: NAME -->``)
are read from the README itself. In a fresh virtual environment whose PATH
holds nothing but its own ``bin`` (no cargo, rustc or cc), the install
commands install Core, the platform wheel and rextio-torch (pip reads the
wheels `cargo xtask dist` built and the pinned wheelhouse instead of an
index); ``python -m rextio_device_cuda probe`` prints the installed probe's
pin, which is pasted into the README's ``rextio.toml``; and ``rextio
generate`` runs inside the simulated-driver namespace, so the provider runs
the shipped probe, which loads the simulated driver from a reviewed path.
The route tests below do the same with this test environment's installation.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

# The shared helpers live beside their own tests.
from cuda_support import json_strings, json_values
from readme_blocks import readme_files
from sim_namespace import (
    DriverLayout,
    SimulatedHost,
    built_binaries,
    built_path,
    namespace_tools_or_fail,
)

# The README section whose tested blocks this file runs.
SECTION = "Use it with Rextio"
PROBE_PLACEHOLDER = 'probe_executable = "/absolute/path/to/rextio-cuda-driver-probe"'
DIGEST_PLACEHOLDER = 'probe_sha256 = "<the 64 hex digits probe printed>"'
LOCK = Path(".rextio") / "generated" / "rust" / "device-provider.lock.json"
ONE_A100 = ("driver_version=12040", "device=NVIDIA Simulated A100|8|0")


@pytest.fixture
def sim_host(tmp_path: Path) -> SimulatedHost:
    return SimulatedHost(built_binaries(), namespace_tools_or_fail(), tmp_path)


def _pasted(probe_output: str) -> tuple[str, str]:
    """The two ``[target.device_options]`` lines ``probe`` printed, as the user copies them."""
    lines = probe_output.splitlines()
    [executable] = [line for line in lines if line.startswith("probe_executable = ")]
    [digest] = [line for line in lines if line.startswith("probe_sha256 = ")]
    return executable, digest


def _installed_pin() -> tuple[str, str]:
    """``python -m rextio_device_cuda probe`` of this test environment."""
    done = subprocess.run(
        [sys.executable, "-m", "rextio_device_cuda", "probe"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return _pasted(done.stdout)


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


def _project(
    root: Path, pin: tuple[str, str], route: str = "libtorch", sm: str | None = None
) -> Path:
    """The README's project, with the two lines ``probe`` printed pasted in."""
    files = readme_files(SECTION)
    assert sorted(files) == [
        "app/kernels.py",
        "core-incompatible.txt",
        "explain.sh",
        "generate.sh",
        "install.sh",
        "probe.sh",
        "refusal.txt",
        "rextio.toml",
        "tensorflow/app/kernels.py",
    ]
    kernels, edits, _, _ = ROUTES[route]
    config = files["rextio.toml"]
    assert config.count(PROBE_PLACEHOLDER) == 1
    assert config.count(DIGEST_PLACEHOLDER) == 1
    config = config.replace(PROBE_PLACEHOLDER, pin[0]).replace(DIGEST_PLACEHOLDER, pin[1])
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
    pin = _installed_pin()
    probe = Path(tomllib.loads(pin[0])["probe_executable"])
    project = _project(tmp_path / "project", pin, route)
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
    project = _project(tmp_path / "project", _installed_pin(), route, sm="sm_86")

    run = sim_host.run(DriverLayout(config=ONE_A100), [_rextio(), "generate", project])

    assert run.returncode != 0, run.stdout
    assert "Traceback" not in run.stderr
    # What the README quotes, line for line and in order, is what was printed.
    quoted = readme_files(SECTION)["refusal.txt"].splitlines()
    printed = [line for line in (run.stdout + run.stderr).splitlines() if line in quoted]
    assert printed == quoted, run.stdout + run.stderr
    assert not (project / ".rextio").exists()


def test_a_wrong_pin_is_refused_naming_both_digests_whole(
    sim_host: SimulatedHost, tmp_path: Path
) -> None:
    executable, digest = _installed_pin()
    real = tomllib.loads(digest)["probe_sha256"]
    wrong = "0" * 64
    project = _project(tmp_path / "project", (executable, f'probe_sha256 = "{wrong}"'))

    run = sim_host.run(DriverLayout(config=ONE_A100), [_rextio(), "generate", project])

    assert run.returncode != 0, run.stdout
    assert "PROBE_DIGEST_MISMATCH" in run.stderr, run.stderr
    # The README: the refusal prints both digests whole, never prefixes.
    assert real in run.stderr, run.stderr
    assert wrong in run.stderr, run.stderr
    # The probe never ran.
    assert run.calls == ()
    assert not (project / ".rextio").exists()


# -- a fresh environment without Rust ------------------------------------------------

NO_RUST = ("cargo", "rustc", "cc")


def _offline_env(venv: Path, tmp_path: Path) -> dict[str, str]:
    """PATH is the venv's own bin alone; pip reads dist's wheels and the wheelhouse."""
    dist, wheelhouse = built_path("dist_dir"), built_path("wheelhouse")
    path = str(venv / "bin")
    for tool in NO_RUST:
        assert shutil.which(tool, path=path) is None, tool
    return {
        "PATH": path,
        "HOME": str(tmp_path / "home"),
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": f"{dist} {wheelhouse}",
        "PIP_CACHE_DIR": str(tmp_path / "pip-cache"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }


def _fresh_venv(tmp_path: Path) -> Path:
    venv = tmp_path / "fresh-venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=120)
    return venv


def _in_directory(name: str) -> list[str]:
    """argv that runs the README's commands ``name`` in the directory given
    after it (a namespace run has no working-directory argument)."""
    return ["/bin/sh", "-e", "-c", f'cd "$0"\n{readme_files(SECTION)[name]}']


def _readme_commands(name: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-e", "-c", readme_files(SECTION)[name]],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_a_fresh_venv_without_rust_reaches_a_ready_pinned_preflight(
    sim_host: SimulatedHost, tmp_path: Path
) -> None:
    # The README's route is CPython 3.11 (rextio-torch 0.1.3 requires <3.12).
    assert sys.version_info[:2] == (3, 11)
    venv = _fresh_venv(tmp_path)
    env = _offline_env(venv, tmp_path)
    # As written: run in the repository, where `cargo xtask dist` left
    # target/dist; the provider comes only from there. The wheelhouse
    # stands in for PyPI (Core and the plugin).
    dist = built_path("dist_dir")
    repository = dist.parents[1]
    assert repository / "target" / "dist" == dist
    env["PIP_FIND_LINKS"] = str(built_path("wheelhouse"))
    assert not list(built_path("wheelhouse").glob("rextio_device_cuda-*"))

    installed = _readme_commands("install.sh", env, repository)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    printed = _readme_commands("probe.sh", env, tmp_path)
    assert printed.returncode == 0, printed.stderr
    pin = _pasted(printed.stdout)
    probe = Path(tomllib.loads(pin[0])["probe_executable"])
    digest = tomllib.loads(pin[1])["probe_sha256"]
    # The probe is the platform wheel's, inside the fresh venv; its digest is its bytes'.
    assert probe.is_relative_to(venv)
    assert probe.parent.name == "_bin"
    assert digest == hashlib.sha256(probe.read_bytes()).hexdigest()
    project = _project(tmp_path / "project", pin)

    # `rextio generate .` as the README shows it, in the project's directory.
    run = sim_host.run(
        DriverLayout(config=ONE_A100),
        [*_in_directory("generate.sh"), project],
        extra_env={"PATH": env["PATH"], "HOME": env["HOME"]},
    )

    assert run.returncode == 0, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    lock = json.loads((project / LOCK).read_text(encoding="utf-8"))
    preflight = lock["device_provider"]["preflight"]
    assert preflight["status"] == "ready"
    observations = {item["key"]: item["value"] for item in preflight["observations"]}
    assert observations["probe.sha256"] == digest
    assert observations["driver.version"] == "12040"
    assert any(call.startswith("cuDeviceComputeCapability") for call in run.calls), run.calls


def test_the_pure_wheel_says_no_probe_ships_and_how_to_build_one(tmp_path: Path) -> None:
    venv = _fresh_venv(tmp_path)
    env = _offline_env(venv, tmp_path)
    pure = Path(env["PIP_FIND_LINKS"].split()[0]) / (
        f"rextio_device_cuda-{metadata.version('rextio-device-cuda')}-py3-none-any.whl"
    )
    installed = subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "rextio==0.1.8", pure],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr

    printed = _readme_commands("probe.sh", env, tmp_path)

    assert (printed.returncode, printed.stdout) == (1, "")
    assert "no probe ships for this platform" in printed.stderr
    assert "python -m rextio_device_cuda build-probe" in printed.stderr
    assert "Traceback" not in printed.stderr


def test_the_readme_explain_commands_run_in_a_fresh_venv(tmp_path: Path) -> None:
    venv = _fresh_venv(tmp_path)
    env = _offline_env(venv, tmp_path)
    dist = built_path("dist_dir")
    installed = _readme_commands("install.sh", env, dist.parents[1])
    assert installed.returncode == 0, installed.stdout + installed.stderr

    explained = _readme_commands("explain.sh", env, tmp_path)

    assert explained.returncode == 0, explained.stdout + explained.stderr
    assert "DEVICE_ORDINAL_INVALID" in explained.stdout
    assert "CUDA_ERROR_OPERATING_SYSTEM" in explained.stdout
    assert "Traceback" not in explained.stderr


@pytest.mark.parametrize("sm", ["80", "sm_99"])
def test_an_sm_outside_the_vocabulary_gets_cores_line_as_the_readme_quotes_it(
    sm: str, sim_host: SimulatedHost, tmp_path: Path
) -> None:
    # Core checks the requirement's architectures against the manifest's
    # before any provider call, so the provider cannot speak first; the
    # README says what Core's line means here.
    [quoted] = readme_files(SECTION)["core-incompatible.txt"].splitlines()
    project = _project(tmp_path / "project", _installed_pin(), sm=sm)

    run = sim_host.run(DriverLayout(config=ONE_A100), [_rextio(), "generate", "-v", project])

    assert run.returncode != 0, run.stdout
    assert quoted in run.stdout + run.stderr, run.stdout + run.stderr
    assert "Traceback" not in run.stderr
    assert "preflight refused" not in run.stderr
    # No provider call ran the probe.
    assert run.calls == ()
    assert not (project / ".rextio").exists()


@pytest.mark.parametrize(
    ("before", "after", "key"),
    [
        ('device_ordinal = "0"', 'device_ordnal = "0"', "device_ordnal"),
        ('sm = "sm_80"', 'sm = "sm_80"\ntoolkit_root = "/opt/cuda-12.8"', "toolkit_root"),
    ],
    ids=["typo", "toolkit-root-on-libtorch"],
)
def test_an_unknown_option_in_rextio_toml_is_named_by_its_key(
    before: str, after: str, key: str, sim_host: SimulatedHost, tmp_path: Path
) -> None:
    # Core passes [target.device_options] through as they are; the provider
    # names the key it does not take, never the value.
    project = _project(tmp_path / "project", _installed_pin())
    config = (project / "rextio.toml").read_text(encoding="utf-8")
    assert config.count(before) == 1
    (project / "rextio.toml").write_text(config.replace(before, after), encoding="utf-8")

    run = sim_host.run(DriverLayout(config=ONE_A100), [_rextio(), "generate", project])

    assert run.returncode != 0, run.stdout
    assert "rextio-device-cuda preflight refused: PROVIDER_OPTION_UNKNOWN: " in run.stderr
    observed = f"\nobserved: {key} is not an option of cuda-libtorch-linux-x86_64\n"
    assert observed in run.stderr, run.stderr
    assert "/opt/cuda-12.8" not in run.stdout + run.stderr
    assert run.calls == ()
