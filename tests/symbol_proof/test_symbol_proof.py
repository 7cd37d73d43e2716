"""docs/maintainers.md's "How to add a driver symbol", done for real on a copy of the
repository (`cargo xtask symbol-proof`, a step of `cargo xtask test`).

1. Every tracked (and not ignored) file is copied to
   ``target/symbol-proof/repo``.
2. ``cuMemcpyHtoD_v2``, ``cuMemcpyDtoH_v2`` and ``cuDeviceGetAttribute``
   (whose ``CUdevice_attribute`` parameter is an enum declared in ``types``)
   are added to the copy's ``templates/driver-symbols.json``: the one edit.
3. ``cargo xtask generate`` there changes the symbol tables, the runtime
   tarball, the tarball digest in ``_generated.py`` and the index together.
4. The copy's whole Rust test suite, ``generate --check`` and the ABI check
   against NVIDIA's headers pass.
5. In a fresh copy, an optional symbol the simulated driver (built from this
   repository) does not export is added; the tables' tests pass and the
   copy's probe still loads and inventories the simulated devices.

The copy builds in ``target/symbol-proof/target``, kept between runs, so
dependencies are compiled once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from sim_namespace import TWO_DEVICES, SimulatedHost, built_binaries, namespace_tools_or_fail

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target")
LIST = "templates/driver-symbols.json"
# What must change when a symbol is added (beside the list itself).
CHANGED_TOGETHER = (
    "runtime/src/driver_api.rs",
    "probe/src/generated/inventory_api.rs",
    "generated/rextio-cuda-runtime-0.1.0.tar.gz",
    "python/rextio_device_cuda/_generated.py",
    "generated/index.json",
)
ADDED = (
    {
        "export": "cuMemcpyHtoD_v2", "api": "cuMemcpyHtoD", "abi_version": 3020, "since": 3020,
        "params": [
            {"name": "destination", "c_type": "CUdeviceptr"},
            {"name": "source", "c_type": "const void *"},
            {"name": "byte_count", "c_type": "size_t"},
        ],
        "components": {"runtime": "required"},
    },
    {
        "export": "cuMemcpyDtoH_v2", "api": "cuMemcpyDtoH", "abi_version": 3020, "since": 3020,
        "params": [
            {"name": "destination", "c_type": "void *"},
            {"name": "source", "c_type": "CUdeviceptr"},
            {"name": "byte_count", "c_type": "size_t"},
        ],
        "components": {"runtime": "required"},
    },
    {
        "export": "cuDeviceGetAttribute", "api": "cuDeviceGetAttribute", "abi_version": 2000,
        "since": 2000,
        "params": [
            {"name": "value", "c_type": "int *"},
            {"name": "attribute", "c_type": "CUdevice_attribute"},
            {"name": "device", "c_type": "CUdevice"},
        ],
        "components": {"probe-inventory": "required", "runtime": "required"},
    },
)
OPTIONAL_ABSENT = {
    "export": "cuDeviceGetLuid", "api": "cuDeviceGetLuid", "abi_version": 10000, "since": 10000,
    "params": [
        {"name": "luid", "c_type": "char *"},
        {"name": "device_node_mask", "c_type": "unsigned int *"},
        {"name": "device", "c_type": "CUdevice"},
    ],
    "components": {"probe-inventory": "optional"},
}


def _tool(name: str) -> str:
    found = shutil.which(name)
    assert found, f"the symbol proof needs `{name}` on PATH"
    return found


def _fresh_copy() -> Path:
    """Every file git tracks or would track (not ignored), copied afresh."""
    copy = TARGET / "symbol-proof" / "repo"
    shutil.rmtree(copy, ignore_errors=True)
    listed = subprocess.run(
        [_tool("git"), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True, timeout=60,
    ).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


def _edit_list(copy: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    path = copy / LIST
    listing = json.loads(path.read_text(encoding="utf-8"))
    edit(listing)
    path.write_text(json.dumps(listing, indent=2) + "\n", encoding="utf-8")


def _cargo(copy: Path, *arguments: str, env: dict[str, str] | None = None) -> None:
    cargo = os.environ.get("CARGO") or shutil.which("cargo") or "cargo"
    environment = {**os.environ, "CARGO_TARGET_DIR": str(TARGET / "symbol-proof" / "target")}
    completed = subprocess.run(
        [cargo, *arguments], cwd=copy, env={**environment, **(env or {})},
        capture_output=True, text=True, timeout=3000, check=False,
    )
    assert completed.returncode == 0, f"cargo {' '.join(arguments)}:\n{completed.stderr[-6000:]}"


def _xtask(copy: Path, *arguments: str, env: dict[str, str] | None = None) -> None:
    _cargo(copy, "run", "--quiet", "--locked", "--package", "xtask", "--", *arguments, env=env)


def test_three_symbols_added_by_one_edit_change_everything_together_and_pass() -> None:
    copy = _fresh_copy()
    before = {path: (copy / path).read_bytes() for path in CHANGED_TOGETHER}

    def add(listing: dict[str, Any]) -> None:
        listing["types"]["CUdevice_attribute"] = {
            "kind": "enum",
            "bits": 32,
            "doc": "A device attribute queried with cuDeviceGetAttribute.",
        }
        listing["symbols"].extend(ADDED)

    _edit_list(copy, add)
    _xtask(copy, "generate")
    changed = [path for path in CHANGED_TOGETHER if (copy / path).read_bytes() != before[path]]
    assert changed == list(CHANGED_TOGETHER)
    table = (copy / "runtime/src/driver_api.rs").read_text(encoding="utf-8")
    # Each export's line in the list `driver_table!` builds `DriverApi` from.
    assert [symbol["export"] for symbol in ADDED if f' {symbol["export"]}(' not in table] == []
    _cargo(copy, "test", "--workspace", "--locked")
    _xtask(copy, "generate", "--check")
    # The copy shares this repository's header cache.
    headers = {"XTASK_NVIDIA_HEADERS_DIR": str(TARGET / "nvidia-headers")}
    _xtask(copy, "abi-check", env=headers)


def test_an_optional_symbol_the_simulated_driver_lacks_still_loads(tmp_path: Path) -> None:
    # A fresh copy, so the list differs from this repository's (whose
    # simulated driver the probe meets) by that one symbol only.
    copy = _fresh_copy()
    _edit_list(copy, lambda listing: listing["symbols"].append(OPTIONAL_ABSENT))
    _xtask(copy, "generate")
    _cargo(copy, "test", "--locked", "--package", "rextio-cuda-runtime", "--package",
           "rextio-cuda-probe")
    _cargo(copy, "build", "--locked", "--package", "rextio-cuda-probe")
    ours = built_binaries()
    exports = subprocess.run(
        [_tool("nm"), "-D", "--defined-only", ours.sim_driver],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    assert "cuDeviceGetLuid" not in exports
    probe = TARGET / "symbol-proof" / "target" / "debug" / "rextio-cuda-driver-probe"
    host = SimulatedHost(ours, namespace_tools_or_fail(), tmp_path)
    run = host.run(TWO_DEVICES, [probe])
    report = run.record()
    assert (report["reason_code"], report["device_count"]) == (None, 2), run.stderr
