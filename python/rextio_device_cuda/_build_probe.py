"""``python -m rextio_device_cuda build-probe``: the reviewed probe and smoke, built here.

Where no binary ships (Windows x86_64, any platform
without a platform wheel), the probe's own sources ship instead, as a
deterministic tarball in ``rextio_device_cuda/_data/`` holding the probe
crate, its ``Cargo.lock``, ``rust-toolchain.toml`` and the runtime and
loader crates it uses as path dependencies. This module builds them with the
user's cargo (``cargo build --release --locked``) and copies the two
binaries into the chosen directory. It runs only when asked; the provider
never finds a probe by itself.

No file another user can write steers the build. Cargo reads
``.cargo/config.toml`` from every ancestor of its working directory, and
rustup reads ``rust-toolchain.toml`` there, whoever owns them. So cargo
never runs in the destination: it runs in a private build directory (mode
0700, a random name) under the user's own cache, ``builds/`` beside the
default destination, and only after every directory from there up to the
root was checked to be root's or the user's and writable by no one else
(OpenSSH's StrictModes rule; a sticky ``/tmp`` fails it, since anyone can
create ``/tmp/.cargo``). The sources are reached with ``--manifest-path``
and the toolchain is named (``RUSTUP_TOOLCHAIN``, the channel of the
tarball's ``rust-toolchain.toml``), so no toolchain file is looked for. The
user's own ``CARGO_HOME`` and environment are trusted. On Windows, where
the standard library reads no owner or ACL and the drive root (``C:\\``) lets
any authenticated user create a folder, the rule is a conservative one:
below the user's profile the directories are the user's; above it, no
directory may hold a ``.cargo`` entry (an entry created after that check
and before cargo starts is not seen; documented in docs/interfaces.md).

Interrupted, it leaves no cargo running and no partial output: cargo runs
under ``_cargo_guard`` in a session of its own, killed as a group with the
build, and killed by the guard when ``build-probe`` dies without a word
(SIGKILL). Every build holds a shared lock on ``builds/lock``; a run that can
take it exclusively knows no build is running and removes the build
directories left by a killed one. Each binary is written into the
destination exclusively and renamed into place (``_user_files``), after the
build succeeded.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import FrameType
from typing import Final

from rextio_device_cuda import _build_recipe, _cargo_guard, _generated, _user_files
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
# Below the build directory: the extracted sources and cargo's target directory.
_SOURCE_FOLDER: Final = "source"
_TARGET_FOLDER: Final = "target"
# Below the user's cache folder for this package: where builds run, the lock
# every build holds, and the prefix that marks a build directory as this
# command's (the folder is private, so nothing else makes entries there).
_BUILDS_FOLDER: Final = "builds"
_LOCK_FILE: Final = "lock"
# Beside it: zig and cargo-zigbuild as the build recipe pins them, reused.
_TOOLS_FOLDER: Final = "tools"
_BUILD_PREFIX: Final = "build-"
_TOOLCHAIN_FILE: Final = PurePosixPath("rust-toolchain.toml")
# The variable that names the user's cache (else a folder below the home).
_CACHE_VARIABLE: Final = "LOCALAPPDATA" if sys.platform == "win32" else "XDG_CACHE_HOME"
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


@dataclass(frozen=True)
class BuiltBinary:
    """A binary written into the destination, and the SHA-256 of its bytes."""

    path: Path
    sha256: str


class _Terminated(BaseException):
    """SIGTERM arrived during the build (raised by the handler, so cleanup runs)."""


def _cache_folder() -> Path:
    """This package's folder in the user's cache (``$XDG_CACHE_HOME`` or
    ``~/.cache``; on Windows ``%LOCALAPPDATA%``)."""
    variable = _CACHE_VARIABLE
    if sys.platform == "win32":
        home_variable, below_home = "USERPROFILE", os.path.join("AppData", "Local")
    else:
        home_variable, below_home = "HOME", ".cache"
    base = os.environ.get(variable, "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            raise BuildProbeUsageError(
                f"build-probe needs a cache directory and no home directory is known: set "
                f"{variable} (or {home_variable}) to an absolute directory of yours"
            )
        base = os.path.join(home, below_home)
    return Path(base) / PROVIDER_SPEC.distribution.name


def default_directory() -> Path:
    """Where ``build-probe`` puts the binaries unless told: the user's cache, never
    the installed package, in a folder named after this version. Raises
    ``BuildProbeUsageError`` when no cache directory can be determined."""
    return _cache_folder() / f"probe-{PROVIDER_SPEC.distribution.version}"


def packaged_probe_source() -> PackagedArchive:
    """The probe's source tarball this installation carries, with its recorded SHA-256."""
    file_name, digest = _generated.PROBE_SOURCE_ARCHIVE, _generated.PROBE_SOURCE_SHA256
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


def _untrusted_reason(directory: Path, profile: Path | None) -> str | None:
    """Why cargo must not read configuration from ``directory``, or None.

    POSIX: the owner is root or the user, and neither group nor others may
    write it. Windows, conservatively: inside the user's profile (``profile``)
    the user's; above it, no ``.cargo`` entry at all.
    """
    if sys.platform == "win32":
        if profile is not None and (directory == profile or profile in directory.parents):
            return None
        if os.path.lexists(directory / ".cargo"):
            return "holds a .cargo entry that other users may have made"
        return None
    status = os.lstat(directory)
    if not stat.S_ISDIR(status.st_mode):
        return "is not a directory"
    if status.st_uid not in (0, os.geteuid()):
        return f"belongs to another user (uid {status.st_uid})"
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"is writable by other users (mode {stat.S_IMODE(status.st_mode):o})"
    return None


def _check_where_cargo_runs(build: Path) -> None:
    """Refuses unless no one but the user and root can write what cargo and rustup
    would read from ``build`` and its ancestors, naming the first directory that fails."""
    real = Path(os.path.realpath(build))
    profile = None
    if sys.platform == "win32":
        user_profile = os.environ.get("USERPROFILE", "")
        profile = Path(os.path.realpath(user_profile)) if os.path.isabs(user_profile) else None
    for directory in (real, *real.parents):
        reason = _untrusted_reason(directory, profile)
        if reason is not None:
            raise BuildProbeError(
                f"{directory} {reason}, and cargo reads its configuration from every directory "
                f"above the one it runs in: set {_CACHE_VARIABLE} to a directory only you and "
                "root can write"
            )


@contextlib.contextmanager
def _builds_lock(builds: Path) -> Iterator[int | None]:
    """The lock every build holds while it runs (shared); held exclusively first
    when no other build runs, to remove the build directories a killed run left."""
    if sys.platform == "win32":
        # No shared lock here: stale build directories stay (they are private).
        yield None
        return
    import fcntl  # POSIX only

    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        lock = os.open(builds / _LOCK_FILE, flags, 0o600)
    except OSError as error:
        raise BuildProbeError(f"cannot lock {builds / _LOCK_FILE}: {error.strerror}") from error
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # another build runs: its directory is not stale
        else:
            for entry in os.scandir(builds):
                if entry.name.startswith(_BUILD_PREFIX):
                    shutil.rmtree(entry.path, ignore_errors=True)
        # Shared from here (a conversion may pass through unlocked; nothing of
        # this run exists yet then).
        fcntl.flock(lock, fcntl.LOCK_SH)
        yield lock
    finally:
        os.close(lock)


def _private_folder(name: str) -> Path:
    """``name`` in this package's cache folder (where builds run, or the recipe's
    tools), made (0700) when missing, once it and every directory above it
    passed ``_check_where_cargo_runs``."""
    folder = _cache_folder() / name
    existing = folder
    while not os.path.lexists(existing) and existing.parent != existing:
        existing = existing.parent
    try:
        # Nothing is made below a directory that would be refused.
        _check_where_cargo_runs(existing)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        _check_where_cargo_runs(folder)
    except OSError as error:
        raise BuildProbeError(f"cannot create {folder}: {error.strerror}") from error
    return folder


def _build_folder() -> Path:
    """The private folder builds run in."""
    return _private_folder(_BUILDS_FOLDER)


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


def _run_cargo(
    command: list[str],
    build: Path,
    lock: int | None,
    channel: str,
    recipe: tuple[dict[str, str], tuple[str, ...]] = ({}, ()),
) -> None:
    """Runs ``command`` under the guard in ``build``; its output goes to stderr.
    ``recipe``: the variables the build recipe sets, and those it removes."""
    variables, cleared = recipe
    removed = {"CARGO_TARGET_DIR", *cleared}
    environment = {key: value for key, value in os.environ.items() if key not in removed}
    # The toolchain named, so rustup looks for no toolchain file; the working
    # directory as cargo will see it.
    environment |= variables | {"RUSTUP_TOOLCHAIN": channel, "PWD": os.path.realpath(build)}
    guard_command = [sys.executable, "-I", os.path.abspath(_cargo_guard.__file__), *command]
    sys.stderr.flush()
    try:
        if sys.platform == "win32":
            guard = subprocess.Popen(
                guard_command,
                cwd=build,
                env=environment,
                stdin=subprocess.PIPE,
                stdout=sys.stderr,
                creationflags=subprocess.CREATE_NEW_PROCESS_GROUP,
            )
        else:
            guard = subprocess.Popen(
                guard_command,
                cwd=build,
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


def build_probe(destination: Path, archive: PackagedArchive | None = None) -> list[BuiltBinary]:
    """Builds the probe and smoke from the packaged sources into ``destination``.

    ``destination`` is created (mode 0700) when missing. Prints one line to
    stderr before cargo starts and one after the binaries were written.
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
    """The binaries the sources in ``tree`` build, by name: with ``recipe`` for
    ``triple`` (its tools fetched first, once), or with cargo alone for this
    host when ``recipe`` is None. The build runs in a fresh private build
    directory, removed afterwards; what it says names ``origin`` (the sources).
    Raises ``BuildProbeError``."""
    channel = _toolchain(tree)
    cargo = _cargo()
    builds = _build_folder()
    with _builds_lock(builds) as lock:
        try:
            # Resolved once: the paths cargo sees are the ones the recipe remaps.
            build = Path(os.path.realpath(tempfile.mkdtemp(prefix=_BUILD_PREFIX, dir=builds)))
        except OSError as error:
            raise BuildProbeError(f"cannot create a build directory in {builds}") from error
        try:
            source, target = build / _SOURCE_FOLDER, build / _TARGET_FOLDER
            environment: tuple[dict[str, str], tuple[str, ...]] = ({}, ())
            if recipe is None or triple is None:
                say(f"building the probe and smoke with cargo (Rust {channel})")
                say(f"from {origin}")
                say(f"in {build}")
                command = [
                    cargo, "build", "--release", "--locked",
                    "--manifest-path", str(source / "Cargo.toml"), "--target-dir", str(target),
                ]  # fmt: skip
                release = target / "release"
            else:
                say(f"building the probe and smoke for {triple} (glibc {recipe.glibc})")
                say(f"with Rust {channel}, {_build_recipe.describe_tools(recipe)}")
                say(f"from {origin}")
                say(f"in {build}")
                tools = _build_recipe.fetch_tools(recipe, _private_folder(_TOOLS_FOLDER), say)
                toolchain = _build_recipe.sysroot(channel, build)
                _build_recipe.check_target_installed(channel, toolchain, triple)
                environment = _build_recipe.build_environment(
                    recipe, tools, source, toolchain, build / "cache"
                )
                command = _build_recipe.build_command(
                    recipe, tools, source / "Cargo.toml", target, triple
                )
                release = _build_recipe.release_folder(target, triple)
            source.mkdir()
            _extract(tree, source)
            _run_cargo(command, build, lock, channel, environment)
            return {
                name: (release / f"{name}{_EXECUTABLE_SUFFIX}").read_bytes()
                for name in BINARY_NAMES
            }
        except _build_recipe.RecipeError as error:
            raise BuildProbeError(str(error)) from error
        except OSError as error:
            reason = error.strerror or error
            raise BuildProbeError(f"the probe was not built: {reason}") from error
        finally:
            shutil.rmtree(build, ignore_errors=True)


def _build_probe(destination: Path, archive: PackagedArchive | None) -> list[BuiltBinary]:
    source_archive = packaged_probe_source() if archive is None else archive
    try:
        tree = source_tree(read_archive(source_archive), source_archive.top_folder)
    except SourceArchiveError as error:
        raise BuildProbeError(str(error)) from error
    # Checked before the destination is made: nothing is left when one fails.
    _toolchain(tree)
    _cargo()
    _build_folder()
    paths = binary_paths(destination)
    try:
        paths[0].parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise BuildProbeError(f"cannot create {destination}: {error.strerror}") from error

    def say(line: str) -> None:
        print(f"build-probe: {line}", file=sys.stderr)

    recipe = packaged_recipe()
    triple = host_target(recipe)
    if triple is None:
        tools = _build_recipe.describe_tools(recipe)
        say(f"the shipped binaries' recipe ({tools}) does not run on this platform:")
        say("building with cargo alone, so the digests will differ from a shipped binary's")
    built_bytes = build_from_sources(
        tree, recipe if triple else None, triple, say, str(source_archive.path)
    )
    built = []
    try:
        for path in paths:
            data = built_bytes[path.name.removesuffix(_EXECUTABLE_SUFFIX)]
            _user_files.write_file(path, data, mode=0o777)
            built.append(BuiltBinary(path, hashlib.sha256(data).hexdigest()))
    except OSError as error:
        reason = error.strerror or error
        raise BuildProbeError(f"the probe was not written: {reason}") from error
    say(f"built; wrote {' and '.join(str(p) for p in paths)}")
    return built
