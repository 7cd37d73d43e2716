"""Hatchling build hook: a platform wheel carries the shipped probe and smoke.

`cargo xtask dist` sets ``REXTIO_WHEEL_PLATFORM`` (a platform tag, e.g.
``manylinux_2_17_x86_64``) and ``REXTIO_WHEEL_BINARIES`` (a directory holding
exactly the release binaries built for it), by the names this module defines
(``PLATFORM_VARIABLE``, ``BINARIES_VARIABLE``; dist imports them from here).
The wheel then carries each file of that directory in
``rextio_device_cuda/_bin/`` with ``SHA256SUMS`` beside them, and is tagged
``py3-none-<platform>``. Without the variables the wheel is
the pure ``py3-none-any`` one, and the sdist never carries binaries.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PLATFORM_VARIABLE = "REXTIO_WHEEL_PLATFORM"
BINARIES_VARIABLE = "REXTIO_WHEEL_BINARIES"


def _shipped_layout(root: str) -> tuple[str, str]:
    """``BIN_DIR`` and ``DIGESTS`` as the package reads them (one place for both)."""
    spec = importlib.util.spec_from_file_location(
        "_rextio_shipped_layout", Path(root, "rextio_device_cuda", "_shipped.py")
    )
    if spec is None or spec.loader is None:
        raise RuntimeError("rextio_device_cuda/_shipped.py cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BIN_DIR, module.DIGESTS


class ShippedBinariesHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        platform = os.environ.get(PLATFORM_VARIABLE)
        if self.target_name != "wheel" or not platform:
            return
        source = Path(os.environ.get(BINARIES_VARIABLE, ""))
        if not source.is_absolute() or not source.is_dir():
            raise RuntimeError(f"{BINARIES_VARIABLE} must name a directory of binaries")
        bin_dir, digests_name = _shipped_layout(self.root)
        binaries = sorted(path for path in source.iterdir() if path.is_file())
        if not binaries:
            raise RuntimeError(f"{BINARIES_VARIABLE} holds no binaries")
        self._scratch = tempfile.mkdtemp(prefix="rextio-wheel-")
        digests = Path(self._scratch, digests_name)
        digests.write_text(
            "".join(
                f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n"
                for path in binaries
            ),
            encoding="ascii",
        )
        package_bin = f"rextio_device_cuda/{bin_dir}"
        for path in binaries:
            build_data["force_include"][str(path)] = f"{package_bin}/{path.name}"
        build_data["force_include"][str(digests)] = f"{package_bin}/{digests_name}"
        build_data["pure_python"] = False
        build_data["tag"] = f"py3-none-{platform}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        scratch = getattr(self, "_scratch", None)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
