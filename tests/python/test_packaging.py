"""The installed wheel: where it is imported from, its entry point, its manifest."""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

from cuda_support import LANES, SPEC, unwrapped
from rextio.devices import DeviceProviderSelection, load_selected_device_provider
from sim_namespace import built_path

import rextio_device_cuda
from rextio_device_cuda import CudaDeviceProvider, CudaProviderConfig, probe, provider

ROOT = Path(__file__).resolve().parents[2]


def _canonical(values: list[str]) -> list[str]:
    """Core's ``_sorted_strings``: trimmed, de-duplicated, sorted."""
    return sorted({value.strip() for value in values})


def _expected_manifest() -> dict[str, Any]:
    """Core 0.1.6's ``DeviceProviderManifest(...).to_dict()`` for the spec,
    written here from the JSON, apart from the provider's own code."""
    manifest = SPEC["manifest"]
    version = SPEC["distribution"]["version"]
    backend = manifest["backend"].strip().lower()
    capabilities = []
    for capability in sorted(SPEC["capabilities"], key=lambda item: item["id"].strip()):
        requirement = LANES[capability["lane"]].get("requirement")
        requirements = []
        if requirement is not None:
            requirements.append(
                {
                    "logical_device": requirement["logical_device"].strip(),
                    "backend": requirement["backend"].strip(),
                    "runtime": requirement["runtime"].strip(),
                    "features": _canonical(requirement["features"]),
                    "layouts": _canonical(requirement["layouts"]),
                    "memory_spaces": _canonical(requirement["memory_spaces"]),
                    "architectures": _canonical(requirement["architectures"]),
                    "reuse_domain_runtime": requirement["reuse_domain_runtime"],
                }
            )
        capabilities.append(
            {
                "id": capability["id"].strip(),
                "target_triples": [capability["target_triple"].strip()],
                "artifact_kinds": _canonical(capability["artifact_kinds"]),
                "cpu_feature_level": None,
                "cpu_features": [],
                "accelerator_backends": [backend],
                "minimum_runtime_version": capability["minimum_runtime_version"].strip(),
                "minimum_driver_version": capability["minimum_driver_version"].strip(),
                "architectures": _canonical([item["sm"] for item in manifest["architectures"]]),
                "device_requirements": requirements,
                "certification_tier": manifest["certification_tier"],
                "evidence_references": _canonical(manifest["evidence_references"]),
            }
        )
    pins = sorted(manifest["runtime_requirements"], key=lambda pin: pin["name"].strip())
    return {
        "provider_id": manifest["provider_id"].strip(),
        "display_name": f"{manifest['display_name']} {version}".strip(),
        "provider_version": version,
        "backend": backend,
        "api_version": manifest["api_version"],
        "stability": "alpha",
        "capabilities": capabilities,
        "runtime_requirements": [
            {
                "name": pin["name"].strip(),
                "version": pin["version"].strip(),
                "features": _canonical(pin["features"]),
            }
            for pin in pins
        ],
    }


def test_package_is_imported_from_the_installed_wheel() -> None:
    site_packages = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert Path(rextio_device_cuda.__file__).resolve().is_relative_to(site_packages)
    assert not Path(rextio_device_cuda.__file__).resolve().is_relative_to(ROOT / "python")


def test_distribution_metadata_matches_the_spec() -> None:
    distribution = SPEC["distribution"]
    installed = metadata.distribution(distribution["name"])
    assert installed.version == distribution["version"] == rextio_device_cuda.__version__
    assert installed.metadata["Requires-Python"] == distribution["requires_python"]
    assert installed.metadata["License-Expression"] == distribution["license"]
    assert installed.requires == ["rextio<0.2,>=0.1.6"]
    points = [
        point
        for point in installed.entry_points
        if point.group == distribution["entry_point"]["group"]
    ]
    assert [(p.name, p.value) for p in points] == [
        (distribution["entry_point"]["name"], distribution["entry_point"]["value"])
    ]
    pyproject = tomllib.loads((ROOT / "python" / "pyproject.toml").read_text())
    project = pyproject["project"]
    assert project["name"] == distribution["name"]
    assert project["version"] == distribution["version"]
    assert project["dependencies"] == distribution["dependencies"]
    assert project["requires-python"] == distribution["requires_python"]


def test_the_running_cpython_is_one_the_package_claims() -> None:
    classifiers = metadata.distribution(SPEC["distribution"]["name"]).metadata.get_all(
        "Classifier", []
    )
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"Programming Language :: Python :: {running}" in classifiers


def test_core_loads_the_entry_point_and_the_manifest_is_the_specs() -> None:
    selection = DeviceProviderSelection("rextio-device-cuda", "cuda-linux-x86_64")
    loaded, source = load_selected_device_provider(selection)
    assert isinstance(loaded, CudaDeviceProvider)
    assert source.distribution_name == "rextio-device-cuda"
    manifest = loaded.manifest().to_dict()
    assert manifest == _expected_manifest()
    assert manifest["api_version"] == SPEC["manifest"]["api_version"]


def test_public_api() -> None:
    assert isinstance(provider(), CudaDeviceProvider)
    assert CudaProviderConfig().probe_path is None
    provider_module = importlib.import_module("rextio_device_cuda.provider")
    assert sorted(provider_module.CAPABILITY_IDS) == sorted(c["id"] for c in SPEC["capabilities"])
    runner = probe.SubprocessProbeRunner(Path("/bin/true"))
    assert isinstance(runner, probe.ProbeRunner)
    assert isinstance(probe.FilesystemToolkitInspector(Path("/")), probe.ToolkitInspector)


def test_the_wheel_is_built_in_an_environment_holding_only_its_build_backend() -> None:
    python = built_path("build_python")
    listed = subprocess.run(
        [
            python,
            "-c",
            "from importlib import metadata\n"
            "for found in metadata.distributions():\n"
            "    print(found.metadata['Name'].lower())\n",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    installed = set(listed.stdout.split())
    assert "hatchling" in installed
    assert installed.isdisjoint({"rextio", "pytest", "ruff", "mypy", "rextio-device-cuda"})


def _probe_command(*, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"]}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-m", "rextio_device_cuda", "probe"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def test_probe_prints_the_installed_probe_its_digest_and_the_lines_to_paste() -> None:
    installed = Path(rextio_device_cuda.__file__).resolve().parent / "_bin"
    shipped = installed / SPEC["probe_report"]["probe"]
    digest = hashlib.sha256(shipped.read_bytes()).hexdigest()
    recorded = (installed / "SHA256SUMS").read_text(encoding="ascii")
    assert f"{digest}  {shipped.name}\n" in recorded
    # pip's RECORD lists it too, with the same digest (urlsafe base64).
    record = metadata.distribution(SPEC["distribution"]["name"]).files or []
    [entry] = [item for item in record if str(item).endswith(f"_bin/{shipped.name}")]
    assert entry.hash is not None
    assert base64.urlsafe_b64decode(entry.hash.value + "=") == bytes.fromhex(digest)

    done = _probe_command()

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"probe: {shipped}"
    assert lines[1].startswith(f"sha256: {digest} ")
    pasted = tomllib.loads("\n".join(lines[2:]))
    assert pasted == {"probe_executable": str(shipped), "probe_sha256": digest}
    assert Path(pasted["probe_executable"]).is_absolute()
    # It is the real probe for this host: it runs and prints its report.
    report = subprocess.run([shipped], capture_output=True, timeout=60, check=False, env={})
    assert report.returncode == 0
    assert json.loads(report.stdout)["probe"] == SPEC["probe_report"]["probe"]


def _package_copy(tmp_path: Path) -> Path:
    """A copy of the installed package that PYTHONPATH puts first."""
    copy = tmp_path / "site" / "rextio_device_cuda"
    shutil.copytree(Path(rextio_device_cuda.__file__).resolve().parent, copy)
    return copy


def test_probe_refuses_a_probe_whose_bytes_are_not_the_recorded_ones(tmp_path: Path) -> None:
    copy = _package_copy(tmp_path)
    shipped = copy / "_bin" / SPEC["probe_report"]["probe"]
    data = bytearray(shipped.read_bytes())
    data[-1] ^= 0xFF
    shipped.write_bytes(bytes(data))

    done = _probe_command(pythonpath=copy.parent)

    assert done.returncode == 1
    assert done.stdout == ""
    assert "not the" in unwrapped(done.stderr)
    assert "reinstall the wheel" in unwrapped(done.stderr)
    assert "Traceback" not in done.stderr


def test_probe_without_shipped_binaries_says_how_to_build_one(tmp_path: Path) -> None:
    copy = _package_copy(tmp_path)
    shutil.rmtree(copy / "_bin")

    done = _probe_command(pythonpath=copy.parent)

    assert (done.returncode, done.stdout) == (1, "")
    assert "no probe ships for this platform" in unwrapped(done.stderr)
    assert "python -m rextio_device_cuda build-probe" in unwrapped(done.stderr)
    assert "Traceback" not in done.stderr
