"""``python -m rextio_device_cuda build-probe``: the reviewed probe and smoke, built here.

Contract section 9.7: where no binary ships (Windows x86_64, any platform
without a platform wheel), the probe's own sources ship instead, as a
deterministic tarball in ``rextio_device_cuda/_data/`` holding the probe
crate, its ``Cargo.lock``, ``rust-toolchain.toml`` and the runtime and
loader crates it uses as path dependencies. This module builds them with the
user's cargo (``cargo build --release --locked``; rustup picks the pinned
toolchain from the toolchain file) and copies the two binaries into the
chosen directory. It runs only when asked; the provider never finds a probe
by itself.

The tarball is checked like every packaged source (``_source_archive``) and
extracted into a private directory (``mkdtemp``: mode 0700, a random name)
inside the destination, built there, and removed again; each binary is then
written into the destination exclusively and renamed into place
(``_user_files``). The extraction goes by path, so it works on Windows too:
nobody else can have planted anything inside a directory this process just
made private, and every directory and file is still created new (``mkdir``,
``open(..., "xb")``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from rextio_device_cuda import _generated, _user_files
from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda._source_archive import (
    PackagedArchive,
    SourceArchiveError,
    SourceTree,
    packaged_data_path,
    read_archive,
    source_tree,
)

_ARCHIVE_SUFFIX: Final = ".tar.gz"
_EXECUTABLE_SUFFIX: Final = ".exe" if sys.platform == "win32" else ""
# The folder below the build directory that holds the extracted sources.
_SOURCE_FOLDER: Final = "source"
# The binaries built, in the order they are printed: the probe first.
BINARY_NAMES: Final[tuple[str, ...]] = (
    PROVIDER_SPEC.probe_report.probe,
    PROVIDER_SPEC.smoke.probe,
)


class BuildProbeError(Exception):
    """The probe could not be built or written; the message says why (no traceback)."""


@dataclass(frozen=True)
class BuiltBinary:
    """A binary written into the destination, and the SHA-256 of its bytes."""

    path: Path
    sha256: str


def default_directory() -> Path:
    """Where ``build-probe`` puts the binaries unless told: the user's cache, never
    the installed package (``$XDG_CACHE_HOME`` or ``~/.cache``; on Windows
    ``%LOCALAPPDATA%``), in a folder named after this version."""
    version = PROVIDER_SPEC.distribution.version
    if sys.platform == "win32":
        local = os.environ.get("LOCALAPPDATA", "")
        base = Path(local) if os.path.isabs(local) else Path.home() / "AppData" / "Local"
    else:
        cache = os.environ.get("XDG_CACHE_HOME", "")
        base = Path(cache) if os.path.isabs(cache) else Path.home() / ".cache"
    return base / PROVIDER_SPEC.distribution.name / f"probe-{version}"


def packaged_probe_source() -> PackagedArchive:
    """The probe's source tarball this installation carries, with its recorded SHA-256."""
    file_name = _generated.PROBE_SOURCE_ARCHIVE
    digest = _generated.PROBE_SOURCE_SHA256
    top_folder = file_name.removesuffix(_ARCHIVE_SUFFIX)
    return PackagedArchive(packaged_data_path(file_name), digest, top_folder)


def binary_paths(destination: Path) -> list[Path]:
    """Where the binaries will be: absolute paths in ``destination``."""
    absolute = Path(os.path.abspath(destination))
    return [absolute / f"{name}{_EXECUTABLE_SUFFIX}" for name in BINARY_NAMES]


def _cargo() -> str:
    cargo = shutil.which("cargo")
    if cargo is None:
        raise BuildProbeError(
            "cargo was not found on PATH: install Rust (https://rustup.rs), then run "
            "this command again"
        )
    return cargo


def _run_cargo(cargo: str, source: Path, target: Path) -> None:
    """``cargo build --release --locked`` in ``source``; its output goes to stderr."""
    command = [cargo, "build", "--release", "--locked", "--target-dir", str(target)]
    # The user's environment (rustup, proxies, the registry's credentials), but
    # the build products go where this command reads them.
    environment = {key: value for key, value in os.environ.items() if key != "CARGO_TARGET_DIR"}
    try:
        done = subprocess.run(command, cwd=source, env=environment, stdout=sys.stderr, check=False)
    except OSError as error:
        raise BuildProbeError(f"cargo could not be started: {error.strerror}") from error
    if done.returncode != 0:
        raise BuildProbeError(
            f"cargo build failed (exit status {done.returncode}); its messages are above"
        )


def _extract(tree: SourceTree, root: Path) -> None:
    """The tree's directories and files, each created new below ``root``."""
    for directory in sorted(tree.directories, key=lambda path: len(path.parts)):
        (root / directory).mkdir()
    for path, (mode, content) in sorted(tree.files.items()):
        with open(root / path, "xb") as output:
            output.write(content)
        os.chmod(root / path, mode)


def build_probe(destination: Path, archive: PackagedArchive | None = None) -> list[BuiltBinary]:
    """Builds the probe and smoke from the packaged sources into ``destination``.

    ``destination`` is created (mode 0700) when missing. Returns the binaries
    written, the probe first; raises ``BuildProbeError``.
    """
    source_archive = packaged_probe_source() if archive is None else archive
    try:
        tree = source_tree(read_archive(source_archive), source_archive.top_folder)
    except SourceArchiveError as error:
        raise BuildProbeError(str(error)) from error
    cargo = _cargo()
    paths = binary_paths(destination)
    try:
        paths[0].parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix=".build-", dir=paths[0].parent))
    except OSError as error:
        raise BuildProbeError(f"cannot create {destination}: {error.strerror}") from error
    try:
        source = build / _SOURCE_FOLDER
        source.mkdir()
        _extract(tree, source)
        target = build / "target"
        _run_cargo(cargo, source, target)
        built = []
        for path in paths:
            data = (target / "release" / path.name).read_bytes()
            _user_files.write_file(path, data, mode=0o777)
            built.append(BuiltBinary(path, hashlib.sha256(data).hexdigest()))
        return built
    except OSError as error:
        raise BuildProbeError(f"the probe was not written: {error.strerror or error}") from error
    finally:
        shutil.rmtree(build, ignore_errors=True)
