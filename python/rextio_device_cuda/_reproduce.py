"""``python -m rextio_device_cuda reproduce [--wheel FILE]``: the shipped binaries, rebuilt.

A platform wheel ships a probe and a smoke that run beside NVIDIA's driver,
often as root. Every wheel also carries the sources they were built from
(the probe's tarball) and the build recipe (``_data/build-recipe.json``).
This command rebuilds the binaries of the installed package, or of a
platform wheel given as a file (x86_64 or aarch64, from either host: zig
cross-links), from those sources with that recipe, in ``build-probe``'s
private build directory, and compares. A wheel's sources and recipe must be
this installation's own (the same release): what the rebuild runs is then
only what the user installed, never what an unchecked wheel names. The rebuild decides: a binary is
reproduced only when the bytes built, the bytes shipped and the wheel's
``SHA256SUMS`` all agree.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import re
import sys
import zipfile
from pathlib import Path
from typing import Final, NamedTuple

from rextio_device_cuda import _build_probe, _build_recipe, _shipped
from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda._source_archive import SourceArchiveError, source_tree

# What the user sees when Ctrl-C stops a rebuild (then exit status 130).
INTERRUPTED: Final = "reproduce: interrupted; no cargo is left running and its build was removed"
# Bounds on what is read from a wheel (the genuine members are a few MiB).
_MAX_MEMBER_BYTES: Final = 64 * 1024 * 1024
_PACKAGE: Final = PROVIDER_SPEC.distribution.import_name
_PROBE_ARCHIVE: Final = re.compile(r"rextio-cuda-probe-[0-9][0-9A-Za-z.+-]*\.tar\.gz")
# A platform wheel's tag (the WHEEL file's `Tag:` line): manylinux_<glibc>_<arch>.
_TAG: Final = re.compile(r"py3-none-manylinux_(?P<glibc>[0-9]+_[0-9]+)_(?P<arch>[a-z0-9_]+)")


class ReproduceUsageError(Exception):
    """Not one of this package's platform wheels (or it carries no binaries):
    one line, exit status 2."""


class Shipped(NamedTuple):
    """What a platform wheel (or this installation) carries, read once into memory."""

    triple: str
    recorded: dict[str, str]
    binaries: dict[str, bytes]
    archive_name: str
    archive: bytes
    recipe: bytes


class Outcome(NamedTuple):
    """One binary: the SHA-256 of the bytes shipped, of the ones built, and whether
    those and the recorded digest all agree."""

    name: str
    shipped: str
    built: str
    reproduced: bool


def _triple(wheel_text: str, glibc: str) -> str:
    """The target triple of the platform wheel whose WHEEL file is ``wheel_text``."""
    for line in wheel_text.splitlines():
        if line.startswith("Tag: "):
            match = _TAG.fullmatch(line.removeprefix("Tag: "))
            if match is not None and match["glibc"] == glibc.replace(".", "_"):
                return f"{match['arch']}-unknown-linux-gnu"
    raise ReproduceUsageError(
        "it carries no binaries: it is not a manylinux platform wheel of this package"
    )


def _read_member(wheel: zipfile.ZipFile, name: str) -> bytes:
    try:
        member = wheel.getinfo(name)
    except KeyError as error:
        raise ReproduceUsageError(f"it has no {name}") from error
    if member.file_size > _MAX_MEMBER_BYTES:
        raise ReproduceUsageError(f"its {name} is too large")
    with wheel.open(member) as handle:
        return handle.read(_MAX_MEMBER_BYTES + 1)


def _from_wheel(path: Path) -> Shipped:
    """What the wheel file at ``path`` carries."""
    try:
        with zipfile.ZipFile(path) as wheel:
            names = wheel.namelist()
            prefix = f"{_PACKAGE}-"
            info = [n for n in names if n.startswith(prefix) and n.endswith(".dist-info/WHEEL")]
            if len(info) != 1:
                raise ReproduceUsageError("it is not a wheel of rextio-device-cuda")
            data = f"{_PACKAGE}/_data/"
            archives = [
                n.removeprefix(data)
                for n in names
                if n.startswith(data) and _PROBE_ARCHIVE.fullmatch(n.removeprefix(data))
            ]
            if len(archives) != 1:
                raise ReproduceUsageError("it carries no probe sources")
            recipe = _read_member(wheel, f"{data}{_build_recipe.RECIPE_FILE}")
            glibc = _parse_recipe(recipe).glibc
            triple = _triple(_read_member(wheel, info[0]).decode("utf-8", "replace"), glibc)
            bin_dir = f"{_PACKAGE}/{_shipped.BIN_DIR}/"
            if f"{bin_dir}{_shipped.DIGESTS}" not in names:
                raise ReproduceUsageError("it carries no binaries")
            recorded = _recorded(_read_member(wheel, f"{bin_dir}{_shipped.DIGESTS}"))
            binaries = {name: _read_member(wheel, f"{bin_dir}{name}") for name in recorded}
            archive = _read_member(wheel, f"{data}{archives[0]}")
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        reason = getattr(error, "strerror", None) or "not a readable zip"
        raise ReproduceUsageError(f"it cannot be read as a wheel ({reason})") from error
    return Shipped(triple, recorded, binaries, archives[0], archive, recipe)


def _from_installation() -> Shipped:
    """What this installation carries (its wheel's tag from its metadata)."""
    package = Path(_shipped.__file__).resolve().parent
    try:
        digests = (package / _shipped.BIN_DIR / _shipped.DIGESTS).read_bytes()
    except FileNotFoundError as error:
        raise ReproduceUsageError(
            "this installation carries no binaries (the pure wheel): give a platform wheel "
            "with --wheel FILE"
        ) from error
    except OSError as error:
        raise ReproduceUsageError(f"its {_shipped.DIGESTS} cannot be read") from error
    recorded = _recorded(digests)
    try:
        binaries = {
            name: (package / _shipped.BIN_DIR / name).read_bytes() for name in recorded
        }
        archive = _build_probe.packaged_probe_source()
        archive_bytes = archive.path.read_bytes()
        recipe = (package / "_data" / _build_recipe.RECIPE_FILE).read_bytes()
        wheel_text = importlib.metadata.distribution(PROVIDER_SPEC.distribution.name).read_text(
            "WHEEL"
        )
    except (OSError, importlib.metadata.PackageNotFoundError) as error:
        raise ReproduceUsageError(
            "this installation is incomplete (a binary, the probe sources, the recipe or "
            "its wheel metadata is missing): reinstall the wheel"
        ) from error
    triple = _triple(wheel_text or "", _parse_recipe(recipe).glibc)
    return Shipped(triple, recorded, binaries, archive.path.name, archive_bytes, recipe)


def _parse_recipe(data: bytes) -> _build_recipe.Recipe:
    try:
        return _build_recipe.parse_recipe(data)
    except _build_recipe.RecipeError as error:
        raise ReproduceUsageError(str(error)) from error


def _recorded(digests: bytes) -> dict[str, str]:
    """``SHA256SUMS``, which must name exactly this package's binaries."""
    try:
        recorded = _shipped.parse_digests(digests.decode("ascii"))
    except (UnicodeDecodeError, _shipped.ShippedBinaryError) as error:
        raise ReproduceUsageError(f"its {_shipped.DIGESTS} is malformed") from error
    if sorted(recorded) != sorted(_build_probe.BINARY_NAMES):
        names = " and ".join(_build_probe.BINARY_NAMES)
        raise ReproduceUsageError(f"its {_shipped.DIGESTS} does not name exactly {names}")
    return recorded


def _check_same_build_as_installed(shipped: Shipped) -> None:
    """Refuses a wheel whose sources or recipe are not this installation's: what
    the rebuild runs (the sources' build, the tools fetched) is then only what
    the user installed, never what an unchecked wheel names."""
    installed = _build_probe.packaged_probe_source()
    same_sources = (shipped.archive_name, hashlib.sha256(shipped.archive).hexdigest()) == (
        installed.path.name,
        installed.sha256,
    )
    try:
        recipe = (installed.path.parent / _build_recipe.RECIPE_FILE).read_bytes()
    except OSError as error:
        raise ReproduceUsageError(
            f"this installation carries no {_build_recipe.RECIPE_FILE}: reinstall it"
        ) from error
    if not same_sources or shipped.recipe != recipe:
        raise ReproduceUsageError(
            "its sources or build recipe are not this installation's: install its own "
            "release to reproduce it"
        )


def reproduce(wheel: Path | None) -> list[Outcome]:
    """Rebuilds and compares the binaries of ``wheel`` (None: this installation).

    Progress goes to stderr. Raises ``ReproduceUsageError`` (exit 2) for what
    is not this package's platform wheel, ``BuildProbeError`` when the rebuild
    fails; Ctrl-C prints one line and raises ``KeyboardInterrupt``.
    """
    shipped = _from_installation() if wheel is None else _from_wheel(wheel)
    _check_same_build_as_installed(shipped)

    def say(line: str) -> None:
        print(f"reproduce: {line}", file=sys.stderr, flush=True)

    recipe = _parse_recipe(shipped.recipe)
    if shipped.triple not in recipe.targets:
        raise ReproduceUsageError(f"its recipe builds no {shipped.triple}")
    archive_digest = hashlib.sha256(shipped.archive).hexdigest()
    say(f"the wheel's sources: {shipped.archive_name} sha256 {archive_digest}")
    try:
        tree = source_tree(shipped.archive, shipped.archive_name.removesuffix(".tar.gz"))
    except SourceArchiveError as error:
        raise ReproduceUsageError(str(error)) from error
    try:
        with _build_probe.sigterm_raises():
            built = _build_probe.build_from_sources(
                tree, recipe, shipped.triple, say, shipped.archive_name
            )
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        raise
    say(f"comparing with the binaries shipped and their {_shipped.DIGESTS}")
    outcomes = []
    for name in _build_probe.BINARY_NAMES:
        shipped_digest = hashlib.sha256(shipped.binaries[name]).hexdigest()
        built_digest = hashlib.sha256(built[name]).hexdigest()
        agree = shipped.recorded[name] == shipped_digest == built_digest
        # A wheel whose bytes were rebuilt exactly but whose record disagrees
        # shows its record as what it ships.
        shown = shipped_digest if shipped_digest != built_digest else shipped.recorded[name]
        outcomes.append(Outcome(name, shown, built_digest, agree))
    return outcomes


def outcome_lines(outcomes: list[Outcome]) -> list[str]:
    """One line per binary: ``reproduced: …`` or ``differs: … shipped … built …``."""
    return [
        f"reproduced: {o.name} sha256 {o.built}"
        if o.reproduced
        else f"differs: {o.name} shipped {o.shipped} built {o.built}"
        for o in outcomes
    ]

