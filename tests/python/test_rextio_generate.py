"""The Rextio CLI: real ``rextio generate`` runs selecting this provider.

A test-only domain plugin (tests/fixtures/cuda_domain_plugin) is installed into
a throwaway ``--target`` directory and reaches the ``rextio`` subprocess only
through ``PYTHONPATH``; the shared venv is never modified. Each sample project
annotates one accepted native function with the plugin type of its lane, so
Core itself derives the CUDA requirement, preflights the selected provider
(running a fixture probe) and either writes ``device-provider.lock.json``
(framework lanes) or rejects the raw lane's contribution before writing
anything. ``rextio generate`` never invokes cargo.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_support import CAPABILITIES, LANES, SPEC, ProbeFactory, json_strings, json_values, report

PROVIDER_ID = "rextio-device-cuda"
PLUGIN_ID = "rextio-cuda-domain-fixture"
PLUGIN_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "cuda_domain_plugin"
# Which fixture plugin type a project of each lane annotates its function with.
LANE_TYPES = {"raw-driver": "RawBuffer", "libtorch": "TorchTensor", "tensorflow-tfe": "TfeTensor"}
RAW_REJECTION = (
    "selected device provider contribution cannot be represented by the bounded "
    "host-extension integration: package_references, generated_helper_ids, runtime_check_ids"
)
LOCK = Path(".rextio") / "generated" / "rust" / "device-provider.lock.json"
TIMEOUT = 120


def _rextio() -> Path:
    executable = Path(sys.executable).with_name("rextio")
    assert executable.is_file(), (
        f"the rextio CLI is not installed next to {sys.executable}; "
        "run the tests from the xtask venv (rextio==0.1.6)"
    )
    return executable


def _environment(site: Path) -> dict[str, str]:
    """This environment minus REXTIO_* overrides, with only ``site`` on PYTHONPATH."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("REXTIO_")}
    env["PYTHONPATH"] = str(site)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture plugin installed (offline, no deps) into a private directory."""
    assert (PLUGIN_DIR / "pyproject.toml").is_file(), f"missing fixture plugin {PLUGIN_DIR}"
    root = tmp_path_factory.mktemp("cuda-domain-plugin")
    source = root / "source"
    shutil.copytree(PLUGIN_DIR, source, ignore=shutil.ignore_patterns("__pycache__", "build"))
    site = root / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--target",
            str(site),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, (
        "could not install the fixture domain plugin (needs pip and hatchling in the venv):\n"
        f"{done.stdout}\n{done.stderr}"
    )
    return site


def test_fixture_plugin_is_discoverable_through_pythonpath_only(plugin_site: Path) -> None:
    code = (
        "import json\n"
        "from importlib import metadata\n"
        "found = metadata.entry_points(group='rextio.plugins')\n"
        "print(json.dumps([[ep.name, ep.value, ep.dist.name] for ep in found]))\n"
    )
    listed = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=_environment(plugin_site),
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert [PLUGIN_ID, "rextio_cuda_domain_fixture.plugin:plugin", PLUGIN_ID] in json.loads(
        listed.stdout
    )
    # Without the private site the shared venv knows nothing of the plugin.
    bare = {key: value for key, value in _environment(plugin_site).items() if key != "PYTHONPATH"}
    unlisted = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=bare,
        check=False,
    )
    assert unlisted.returncode == 0, unlisted.stderr
    assert PLUGIN_ID not in unlisted.stdout


def _probe(probes: ProbeFactory, sm: str = "sm_80") -> Path:
    """A /bin/sh probe printing a complete report of one ``sm`` device; it appends to its marker."""
    marker = shlex.quote(str(probes.marker()))
    printed = shlex.quote(json.dumps(report(sms=(sm,))))
    return probes.shell(f"echo ran >> {marker}\nprintf '%s\\n' {printed}\n")


def _write_project(root: Path, capability: str, probe: Path) -> Path:
    """A minimal project: one accepted native function typed with the lane's plugin type."""
    type_name = LANE_TYPES[CAPABILITIES[capability]["lane"]]
    package = root / "app"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "kernels.py").write_text(
        "import rextio\n"
        f"from rextio_cuda_domain_fixture.values import {type_name}\n"
        "\n"
        "\n"
        "@rextio.native\n"
        f"def scaled(value: {type_name}, factor: int) -> int:\n"
        "    return factor * 2\n",
        encoding="utf-8",
    )
    (root / "rextio.toml").write_text(
        "[plugins]\n"
        f"enabled = [{json.dumps(PLUGIN_ID)}]\n"
        "\n"
        "[target]\n"
        f"device_provider = {json.dumps(PROVIDER_ID)}\n"
        f"device_capability = {json.dumps(capability)}\n"
        "\n"
        "[target.device_options]\n"
        f"probe_executable = {json.dumps(str(probe))}\n"
        'device_ordinal = "0"\n'
        'sm = "sm_80"\n',
        encoding="utf-8",
    )
    return root


def _generate(project: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(_rextio()), "generate", "--format", "json", str(project)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        cwd=cwd,
        env=_environment(site),
        check=False,
    )


def _snapshot(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root``: file bytes, or None for a directory."""
    return {
        str(path.relative_to(root)): None if path.is_dir() else path.read_bytes()
        for path in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize(
    "capability", ["cuda-libtorch-linux-x86_64", "cuda-tensorflow-tfe-linux-x86_64"]
)
def test_framework_lane_generates_a_redacted_lock(
    capability: str, plugin_site: Path, probes: ProbeFactory, tmp_path: Path
) -> None:
    lane = CAPABILITIES[capability]["lane"]
    probe = _probe(probes)
    project = _write_project(tmp_path / "project", capability, probe)

    done = _generate(project, plugin_site, cwd=tmp_path)

    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "Traceback" not in output
    summary = json.loads(done.stdout)
    assert summary["status"] == "generated"
    assert summary["accepted_native_count"] == 1
    assert summary["native_source"] == "generated"
    assert probes.marker().read_text() == "ran\n", "Core must preflight through the probe once"

    lock_path = project / LOCK
    assert lock_path.is_file(), f"no {LOCK} after a successful generate:\n{output}"
    text = lock_path.read_text(encoding="utf-8")
    lock = json.loads(text)
    assert lock["schema_version"] == 1
    plan = lock["device_provider"]
    assert plan["selection"] == {"provider_id": PROVIDER_ID, "capability_id": capability}
    for record in (plan["lock"], plan["report"]["lock"]):
        assert record["provider_id"] == PROVIDER_ID
        assert record["capability_id"] == capability
        assert record["option_keys"] == ["device_ordinal", "probe_executable", "sm"]
    assert plan["source"]["entry_point_name"] == PROVIDER_ID
    assert plan["source"]["distribution_name"] == PROVIDER_ID
    assert plan["preflight"]["status"] == "ready"
    assert plan["preflight"]["reason_codes"] == []

    claims = json_values(lock, "support_claim")
    assert claims, "the lock records no support_claim at all"
    assert all(claim is False for claim in claims), claims

    # Core derived exactly the frozen lane requirement from the plugin type,
    # composed with the selected SM, plus the frozen runtime pins.
    profile = plan["artifact_profile"]
    assert profile["kind"] == "host-extension"
    expected = {**LANES[lane]["requirement"], "architectures": ["sm_80"]}
    assert profile["device_requirements"] == [expected]
    for pin in LANES[lane]["runtime_pins"]:
        assert pin in profile["runtime_requirements"]

    observations = {item["key"]: item["value"] for item in plan["preflight"]["observations"]}
    assert observations["selected.sm"] == "sm_80"
    assert observations["selected.device"] == "0"
    for key, value in LANES[lane]["observations"].items():
        assert observations[key] == value

    contribution = plan["contribution"]
    assert contribution["package_references"] == []
    assert contribution["generated_helper_ids"] == []
    assert contribution["runtime_check_ids"] == []
    assert sorted(item["resource_kind"] for item in contribution["resource_contracts"]) == sorted(
        item["resource_kind"] for item in LANES[lane]["contribution"]["resource_contracts"]
    )

    # Options enter as key names plus a digest: no path, no absolute string.
    for secret in (str(tmp_path), str(probe), str(probe.resolve()), str(project)):
        assert secret not in text
    absolute = [value for value in json_strings(lock) if value.startswith("/")]
    assert absolute == []


def test_raw_lane_is_rejected_before_anything_is_written(
    plugin_site: Path, probes: ProbeFactory, tmp_path: Path
) -> None:
    capability = "cuda-linux-x86_64"
    assert CAPABILITIES[capability]["lane"] == "raw-driver"
    probe = _probe(probes)
    project = _write_project(tmp_path / "project", capability, probe)
    before = _snapshot(project)

    done = _generate(project, plugin_site, cwd=tmp_path)

    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert RAW_REJECTION in output
    assert "Traceback" not in output
    # Preflight did run (the contribution exists only after it); Core then
    # refused the raw lane's package/helper/runtime-check inputs.
    assert probes.marker().is_file(), "the rejection must follow a real preflight"
    assert _snapshot(project) == before
    assert not (project / ".rextio").exists()
    assert not list(project.rglob("device-provider.lock.json"))


@pytest.mark.parametrize(
    "capability", ["cuda-libtorch-linux-x86_64", "cuda-tensorflow-tfe-linux-x86_64"]
)
def test_refused_preflight_names_its_reason_on_stderr(
    capability: str, plugin_site: Path, probes: ProbeFactory, tmp_path: Path
) -> None:
    # The probe reports an sm_75 device; the project selects sm_80.
    probe = _probe(probes, sm="sm_75")
    project = _write_project(tmp_path / "project", capability, probe)
    before = _snapshot(project)

    done = _generate(project, plugin_site, cwd=tmp_path)

    assert done.returncode != 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    explanation, remedy = SPEC["reason_codes"]["CUDA_SM_MISMATCH"]
    # The refusal's lines as Core's run prints them, each within 100 columns (Core's
    # own error line after them is Core's).
    lines = done.stderr.splitlines()
    [start] = [index for index, line in enumerate(lines) if "preflight refused" in line]
    end = next(index for index in range(start, len(lines)) if lines[index].startswith("more: "))
    refusal = lines[start : end + 1]
    assert all(len(line) <= 100 for line in refusal), refusal
    assert "\n".join(refusal).replace("\n  ", " ").splitlines() == [
        f"{PROVIDER_ID} preflight refused: CUDA_SM_MISMATCH: {explanation}",
        "observed: device 0 is sm_75 (Fixture GPU 0); sm_80 was selected",
        f"remedy: {remedy}",
        "more: python -m rextio_device_cuda explain CUDA_SM_MISMATCH",
    ]
    for secret in (str(tmp_path), str(probe), str(project)):
        assert secret not in done.stderr
    assert probes.marker().read_text() == "ran\n"
    assert _snapshot(project) == before
