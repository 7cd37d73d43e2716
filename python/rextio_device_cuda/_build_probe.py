"""``python -m rextio_device_cuda build-probe``: the reviewed probe and smoke, built here.

Where no binary ships (Windows x86_64, any platform
without a platform wheel), the probe's own sources ship instead, as a
deterministic tarball in ``rextio_device_cuda/_data/`` holding the probe
crate, its ``Cargo.lock``, ``rust-toolchain.toml`` and the runtime and
loader crates it uses as path dependencies. This module builds them and
copies the two binaries into the chosen directory. On Linux x86_64 and
aarch64 it follows the build recipe of the shipped binaries
(``_build_recipe``: zig and cargo-zigbuild fetched by hash, glibc 2.17,
prefixes remapped), so it writes the bytes the platform wheel ships; elsewhere
it builds with the user's cargo alone (``cargo build --release --locked``)
and says the digests will differ. ``reproduce`` builds the same way
(``build_from_sources``). It runs only when asked; the provider never finds
a probe by itself.

No file another user can write steers the build: cargo never runs in the
destination but in a private build directory under the user's own cache,
on a path checked once and then used as checked (``_build_directory``).
The sources are reached with ``--manifest-path`` and the toolchain is named
(``RUSTUP_TOOLCHAIN``, the channel of the tarball's ``rust-toolchain.toml``),
so no toolchain file is looked for. The user's own ``CARGO_HOME`` and
environment are trusted.

Interrupted, it leaves no cargo running and no partial output: cargo runs
under ``_cargo_guard`` in a session of its own, killed as a group with the
build, and killed by the guard when ``build-probe`` dies without a word
(SIGKILL); the next run removes the build directory a killed one left.
Each binary is written into the destination exclusively and renamed into
place (``_user_files``), after the build succeeded.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from types import FrameType
from typing import Final

from rextio_device_cuda import (
    _build_directory,
    _build_recipe,
    _cargo_guard,
    _generated,
    _user_files,
)
from rextio_device_cuda._build_directory import BuildDirectory
from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda._shipped import Binary
from rextio_device_cuda._source_archive import (
    PackagedArchive,
    SourceArchiveError,
    SourceTree,
    packaged_archive,
    packaged_data_path,
)

_EXECUTABLE_SUFFIX: Final = ".exe" if sys.platform == "win32" else ""
# Below the build directory: the extracted sources and cargo's target directory.
_SOURCE_FOLDER: Final = "source"
_TARGET_FOLDER: Final = "target"
# In this package's cache folder: zig and cargo-zigbuild as the build recipe
# pins them, fetched once and reused.
_TOOLS_FOLDER: Final = "tools"
_TOOLCHAIN_FILE: Final = PurePosixPath("rust-toolchain.toml")
# A rustup channel name (RUSTUP_TOOLCHAIN also takes a path, never wanted here).
_CHANNEL: Final = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]*")
# What the user sees when Ctrl-C stops a build (then exit status 130).
INTERRUPTED: Final = "build-probe: interrupted; no cargo is left running and its build was removed"
# The binaries built, in the order they are printed: the probe first.
BINARY_NAMES: Final[tuple[str, ...]] = (
    PROVIDER_SPEC.probe_report.probe,
    PROVIDER_SPEC.smoke.probe,
)


class BuildProbeError(Exception):
    """The probe could not be built or written; the message says why (no traceback)."""


class BuildProbeUsageError(BuildProbeError):
    """Input ``build-probe`` cannot use (no cache directory, which every build
    needs): one line, exit status 2 (a ``BuildProbeError``
    too, so a caller that knows only that one still prints no traceback)."""


class _Terminated(BaseException):
    """SIGTERM arrived during the build (raised by the handler, so cleanup runs)."""


def default_directory() -> Path:
    """Where ``build-probe`` puts the binaries unless told: the user's cache, never
    the installed package, in a folder named after this version. Raises
    ``BuildProbeUsageError`` when no cache directory can be determined."""
    try:
        return _build_directory.cache_folder() / f"probe-{PROVIDER_SPEC.distribution.version}"
    except _build_directory.NoCacheDirectoryError as error:
        raise BuildProbeUsageError(str(error)) from error


def packaged_probe_source() -> PackagedArchive:
    """The probe's source tarball this installation carries, with its recorded SHA-256."""
    return packaged_archive(_generated.PROBE_SOURCE_ARCHIVE, _generated.PROBE_SOURCE_SHA256)


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


def _toolchain(tree: SourceTree) -> str:
    """The channel the sources pin (their ``rust-toolchain.toml``), named to rustup."""
    entry = tree.files.get(_TOOLCHAIN_FILE)
    channel = None
    if entry is not None:
        with contextlib.suppress(UnicodeDecodeError, tomllib.TOMLDecodeError):
            toolchain = tomllib.loads(entry[1].decode("utf-8")).get("toolchain")
            if isinstance(toolchain, dict):
                channel = toolchain.get("channel")
    if not isinstance(channel, str) or _CHANNEL.fullmatch(channel) is None:
        raise BuildProbeError(f"the packaged probe sources pin no toolchain in {_TOOLCHAIN_FILE}")
    return channel


def _stop(guard: subprocess.Popen[bytes]) -> None:
    """Kills the guard's group (cargo, rustc, build scripts) and reaps the guard."""
    if guard.returncode is None:
        if sys.platform == "win32":
            # The guard kills cargo's tree when its input ends.
            with contextlib.suppress(OSError):
                if guard.stdin is not None:
                    guard.stdin.close()
        else:
            # The guard is not reaped yet, so its group id is still the group's.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(guard.pid, signal.SIGKILL)
    guard.wait()


def run_cargo(
    command: list[str],
    build: BuildDirectory,
    channel: str,
    recipe: tuple[dict[str, str], tuple[str, ...]] = ({}, ()),
) -> None:
    """Runs ``command`` (cargo and its arguments) under the guard in ``build``, with
    rustup's toolchain ``channel``; its output goes to stderr. ``recipe``: the
    variables the build recipe sets, and those it removes. Raises
    ``BuildProbeError`` when it fails; interrupted, leaves nothing of it running."""
    variables, cleared = recipe
    removed = {"CARGO_TARGET_DIR", *cleared}
    environment = {key: value for key, value in os.environ.items() if key not in removed}
    # The toolchain named, so rustup looks for no toolchain file; the working
    # directory as cargo will see it (the checked path, already resolved).
    environment |= variables | {"RUSTUP_TOOLCHAIN": channel, "PWD": str(build.path)}
    guard_command = [sys.executable, "-I", os.path.abspath(_cargo_guard.__file__), *command]
    lock = build.lock
    sys.stderr.flush()
    try:
        if sys.platform == "win32":
            guard = subprocess.Popen(
                guard_command,
                cwd=build.path,
                env=environment,
                stdin=subprocess.PIPE,
                stdout=sys.stderr,
                creationflags=subprocess.CREATE_NEW_PROCESS_GROUP,
            )
        else:
            guard = subprocess.Popen(
                guard_command,
                cwd=build.path,
                env=environment,
                stdin=subprocess.PIPE,
                stdout=sys.stderr,
                start_new_session=True,
                # The guard holds the build's lock too: it is released only
                # once the guard has killed cargo, whoever ends first.
                pass_fds=() if lock is None else (lock,),
            )
    except OSError as error:
        raise BuildProbeError(f"cargo could not be started: {error.strerror}") from error
    try:
        if sys.platform == "linux":
            # Waited for without reaping, so the group can still be named and
            # whatever cargo left in it killed.
            os.waitid(os.P_PID, guard.pid, os.WEXITED | os.WNOWAIT)
            _stop(guard)
        else:
            guard.wait()
    except BaseException:
        _stop(guard)
        raise
    if guard.returncode != 0:
        raise BuildProbeError(
            f"cargo build failed (exit status {guard.returncode}); its messages are above"
        )


def _extract(tree: SourceTree, root: Path) -> None:
    """The tree's directories and files, each created new below ``root``."""
    for directory in sorted(tree.directories, key=lambda path: len(path.parts)):
        (root / directory).mkdir()
    for path, (mode, content) in sorted(tree.files.items()):
        with open(root / path, "xb") as output:
            output.write(content)
        os.chmod(root / path, mode)


@contextlib.contextmanager
def _private_build_directory() -> Iterator[BuildDirectory]:
    """A new private build directory (``_build_directory``), its refusals as
    build-probe's errors: no cache directory known is a usage error."""
    try:
        with _build_directory.private_build_directory() as build:
            yield build
    except _build_directory.NoCacheDirectoryError as error:
        raise BuildProbeUsageError(str(error)) from error
    except _build_directory.BuildDirectoryError as error:
        raise BuildProbeError(str(error)) from error


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """SIGTERM during the build raises ``_Terminated`` (so cargo is stopped and the
    build removed), then is delivered again to whatever handled it before."""
    if threading.current_thread() is not threading.main_thread() or sys.platform == "win32":
        yield
        return

    def terminated(_signal: int, _frame: FrameType | None) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, previous)
        os.kill(os.getpid(), signal.SIGTERM)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def build_probe(
    destination: Path | None, archive: PackagedArchive | None = None
) -> list[Binary]:
    """Builds the probe and smoke from the packaged sources into ``destination``
    (None: the default directory, below the cache folder as the build resolved it).

    ``destination`` is created (mode 0700) when missing. Says on stderr what it
    builds, with what, from where and in which directory before cargo starts,
    and one line after the binaries were written.
    Returns the binaries written, the probe first; raises ``BuildProbeError``,
    or ``BuildProbeUsageError`` when no cache directory is known. Ctrl-C
    prints one line and raises ``KeyboardInterrupt``.
    """
    try:
        with sigterm_raises():
            return _build_probe(destination, archive)
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        raise


def packaged_recipe() -> _build_recipe.Recipe:
    """The build recipe this installation carries (``_data/build-recipe.json``)."""
    try:
        data = packaged_data_path(_build_recipe.RECIPE_FILE).read_bytes()
    except OSError as error:
        missing = f"this installation carries no {_build_recipe.RECIPE_FILE}"
        raise BuildProbeError(missing) from error
    try:
        return _build_recipe.parse_recipe(data)
    except _build_recipe.RecipeError as error:
        raise BuildProbeError(str(error)) from error


def host_target(recipe: _build_recipe.Recipe) -> str | None:
    """The recipe's target for this host, or None where the recipe cannot run here."""
    arch = _build_recipe.host_architecture()
    triple = f"{arch}-unknown-linux-gnu"
    return triple if arch is not None and triple in recipe.targets else None


def build_from_sources(
    tree: SourceTree,
    recipe: _build_recipe.Recipe | None,
    triple: str | None,
    say: Callable[[str], None],
    origin: str,
) -> dict[str, bytes]:
    """The binaries the sources in ``tree`` build, by name, in a new private build
    directory (``_compile``). Raises ``BuildProbeError``, or
    ``BuildProbeUsageError`` when no cache directory is known."""
    channel = _toolchain(tree)
    cargo = _cargo()
    with _private_build_directory() as build:
        return _compile(build, tree, channel, cargo, (recipe, triple), say, origin)


def _compile(
    build: BuildDirectory,
    tree: SourceTree,
    channel: str,
    cargo: str,
    recipe_for: tuple[_build_recipe.Recipe | None, str | None],
    say: Callable[[str], None],
    origin: str,
) -> dict[str, bytes]:
    """The binaries the sources in ``tree`` build in ``build``, by name: with the
    recipe for the target (``recipe_for``; its tools fetched once into the
    checked cache folder), or with cargo alone for this host when there is no
    recipe. What it says names ``origin`` (the sources)."""
    recipe, triple = recipe_for
    source, target = build.path / _SOURCE_FOLDER, build.path / _TARGET_FOLDER
    environment: tuple[dict[str, str], tuple[str, ...]] = ({}, ())
    try:
        if recipe is None or triple is None:
            say(f"building the probe and smoke with cargo (Rust {channel})")
            say(f"from {origin}")
            say(f"in {build.path}")
            command = [
                cargo, "build", "--release", "--locked",
                "--manifest-path", str(source / "Cargo.toml"), "--target-dir", str(target),
            ]  # fmt: skip
            release = target / "release"
        else:
            say(f"building the probe and smoke for {triple} (glibc {recipe.glibc})")
            say(f"with Rust {channel}, {_build_recipe.describe_tools(recipe)}")
            say(f"from {origin}")
            say(f"in {build.path}")
            # Below the cache folder as the build directory resolved and checked it.
            tools_folder = build.cache / _TOOLS_FOLDER
            _build_directory.make_private_directories(tools_folder)
            tools = _build_recipe.fetch_tools(recipe, tools_folder, say)
            toolchain = _build_recipe.sysroot(channel, build.path)
            _build_recipe.check_target_installed(channel, toolchain, triple)
            environment = _build_recipe.build_environment(
                recipe, tools, source, toolchain, build.path / "cache"
            )
            command = _build_recipe.build_command(
                recipe, tools, source / "Cargo.toml", target, triple
            )
            release = _build_recipe.release_folder(target, triple)
        source.mkdir()
        _extract(tree, source)
        run_cargo(command, build, channel, environment)
        return {
            name: (release / f"{name}{_EXECUTABLE_SUFFIX}").read_bytes() for name in BINARY_NAMES
        }
    except _build_recipe.RecipeError as error:
        raise BuildProbeError(str(error)) from error
    except OSError as error:
        reason = error.strerror or error
        raise BuildProbeError(f"the probe was not built: {reason}") from error


def _build_probe(destination: Path | None, archive: PackagedArchive | None) -> list[Binary]:
    source_archive = packaged_probe_source() if archive is None else archive
    try:
        tree = source_archive.tree()
    except SourceArchiveError as error:
        raise BuildProbeError(str(error)) from error
    channel = _toolchain(tree)
    cargo = _cargo()
    recipe = packaged_recipe()
    with _private_build_directory() as build:
        return _build_in(build, tree, destination, channel, cargo, source_archive, recipe)


def _build_in(
    build: BuildDirectory,
    tree: SourceTree,
    destination: Path | None,
    channel: str,
    cargo: str,
    source_archive: PackagedArchive,
    recipe: _build_recipe.Recipe,
) -> list[Binary]:
    if destination is None:
        destination = build.cache / default_directory().name
    paths = binary_paths(destination)
    try:
        _build_directory.make_private_directories(paths[0].parent)
    except OSError as error:
        raise BuildProbeError(f"cannot create {destination}: {error.strerror}") from error

    def say(line: str) -> None:
        print(f"build-probe: {line}", file=sys.stderr)

    # The shipped binaries' recipe where it runs, so the bytes are the shipped ones.
    triple = host_target(recipe)
    if triple is None:
        tools = _build_recipe.describe_tools(recipe)
        say(f"the shipped binaries' recipe ({tools}) does not run on this platform:")
        say("building with cargo alone, so the digests will differ from a shipped binary's")
    recipe_for = (recipe if triple else None, triple)
    built_bytes = _compile(build, tree, channel, cargo, recipe_for, say, str(source_archive.path))
    built = []
    try:
        for path in paths:
            data = built_bytes[path.name.removesuffix(_EXECUTABLE_SUFFIX)]
            # 0755: none but the user can change what they will pin, whatever the umask.
            _user_files.write_file(path, data, mode=0o755)
            built.append(Binary(path, hashlib.sha256(data).hexdigest()))
    except OSError as error:
        reason = error.strerror or error
        raise BuildProbeError(f"the probe was not written: {reason}") from error
    say(f"built; wrote {' and '.join(str(p) for p in paths)}")
    return built
