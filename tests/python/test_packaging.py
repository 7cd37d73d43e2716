"""The installed wheel: where it is imported from, its entry point, its manifest."""

from __future__ import annotations

import importlib
import json
import subprocess
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

from cuda_support import SPEC
from rextio.devices import DeviceProviderSelection, load_selected_device_provider
from sim_namespace import built_path

import rextio_device_cuda
from rextio_device_cuda import CudaDeviceProvider, CudaProviderConfig, probe, provider

ROOT = Path(__file__).resolve().parents[2]


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


def test_core_loads_the_entry_point_and_the_manifest_matches_generated() -> None:
    selection = DeviceProviderSelection("rextio-device-cuda", "cuda-linux-x86_64")
    loaded, source = load_selected_device_provider(selection)
    assert isinstance(loaded, CudaDeviceProvider)
    assert source.distribution_name == "rextio-device-cuda"
    manifest = loaded.manifest().to_dict()
    generated = ROOT / "generated" / "manifest.json"
    assert manifest == json.loads(generated.read_text(encoding="utf-8"))
    expected = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    assert generated.read_bytes() == expected.encode("utf-8")
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
