"""The build recipe of the shipped probe and smoke, and the tools it names.

One recipe (``build-recipe.json``: ``templates/`` in the repository, ``_data/``
in every wheel and the sdist) says how the binaries a platform wheel ships
are built: the Rust toolchain of the probe sources' ``rust-toolchain.toml``,
zig and cargo-zigbuild taken from PyPI by exact version and SHA-256, the
glibc floor each target links against, the path prefixes remapped so the
bytes do not depend on where the sources, the cargo home or the toolchain
live, ``SOURCE_DATE_EPOCH`` and ``--locked``. ``cargo xtask dist`` runs this
file as a script; ``build-probe`` and ``reproduce`` import it. The same
command then builds the same bytes wherever it runs.

Standard library only: ``cargo xtask dist`` runs it isolated (``python -I``),
before any package exists.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Final, NamedTuple

RECIPE_FILE: Final = "build-recipe.json"
# The tool wheels are a few tens of MiB; anything far larger is not them.
_MAX_WHEEL_BYTES: Final = 512 * 1024 * 1024
# Marks a tool folder whose wheel was checked and fully extracted.
_COMPLETE: Final = ".complete"
# What else cargo reads from the environment that would change the bytes:
# flags, wrappers, profile and build settings (the recipe sets its own).
_CLEARED_VARIABLES: Final = ("RUSTFLAGS", "RUSTC", "RUSTC_WRAPPER", "RUSTC_WORKSPACE_WRAPPER")
_CLEARED_PREFIXES: Final = ("CARGO_BUILD_", "CARGO_PROFILE_", "CARGO_TARGET_")


class RecipeError(Exception):
    """The recipe cannot be read or its tools fetched here; the message says why."""


class ToolWheel(NamedTuple):
    """One tool's wheel for one host architecture: where PyPI serves it, its SHA-256."""

    url: str
    sha256: str


class Tool(NamedTuple):
    """A tool the recipe takes from PyPI; ``program`` is its path inside the wheel."""

    name: str
    version: str
    program: str
    wheels: Mapping[str, ToolWheel]


class Remapped(NamedTuple):
    """What each host path is shown as in the binaries."""

    source: str
    cargo_home: str
    sysroot: str


class Recipe(NamedTuple):
    glibc: str
    targets: tuple[str, ...]
    source_date_epoch: str
    remapped: Remapped
    tools: tuple[Tool, ...]


class Tools(NamedTuple):
    """The fetched programs: zig (named to cargo-zigbuild) and cargo-zigbuild."""

    zig: Path
    cargo_zigbuild: Path


def _fields(value: object, keys: tuple[str, ...], where: str) -> dict[str, object]:
    if not isinstance(value, dict) or set(value) != set(keys):
        raise RecipeError(f"the build recipe's {where} is not the expected record")
    return value


def _text(value: object, where: str) -> str:
    if not isinstance(value, str) or not value or any(ord(c) < 0x21 for c in value):
        raise RecipeError(f"the build recipe's {where} is not a word")
    return value


def parse_recipe(data: bytes) -> Recipe:
    """The recipe in ``data``; raises ``RecipeError`` on anything unexpected."""
    try:
        document = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RecipeError("the build recipe is not JSON") from error
    keys = ("comment", "glibc", "targets", "source_date_epoch", "remapped", "tools")
    top = _fields(document, keys, "document")
    remapped = _fields(top["remapped"], Remapped._fields, "remapped")
    targets, tools = top["targets"], top["tools"]
    if not isinstance(targets, list) or not isinstance(tools, list):
        raise RecipeError("the build recipe's targets and tools are not lists")
    parsed_tools = []
    for tool in tools:
        fields = _fields(tool, ("name", "version", "program", "wheels"), "tool")
        wheels = fields["wheels"]
        if not isinstance(wheels, dict):
            raise RecipeError("the build recipe's tool wheels are not a record")
        parsed_wheels = {}
        for arch, wheel in wheels.items():
            wheel_fields = _fields(wheel, ToolWheel._fields, "tool wheel")
            url, digest = _text(wheel_fields["url"], "url"), _text(wheel_fields["sha256"], "sha256")
            if not url.startswith("https://") or len(digest) != 64:
                raise RecipeError("the build recipe names a tool wheel it cannot check")
            parsed_wheels[_text(arch, "architecture")] = ToolWheel(url, digest)
        parsed_tools.append(
            Tool(
                _text(fields["name"], "tool name"),
                _text(fields["version"], "tool version"),
                _text(fields["program"], "tool program"),
                parsed_wheels,
            )
        )
    if sorted(tool.name for tool in parsed_tools) != ["cargo-zigbuild", "ziglang"]:
        raise RecipeError("the build recipe's tools are not zig and cargo-zigbuild")
    return Recipe(
        _text(top["glibc"], "glibc"),
        tuple(_text(target, "target") for target in targets),
        _text(top["source_date_epoch"], "source_date_epoch"),
        Remapped(*(_text(remapped[key], key) for key in Remapped._fields)),
        tuple(parsed_tools),
    )


def host_architecture() -> str | None:
    """This host's architecture as the recipe names its tool wheels, or None
    where the recipe's tools do not run (not Linux, or another CPU)."""
    if sys.platform != "linux":
        return None
    machine = {"arm64": "aarch64", "amd64": "x86_64"}.get(platform.machine().lower())
    machine = machine or platform.machine()
    return machine if machine in ("x86_64", "aarch64") else None


def _tool(recipe: Recipe, name: str) -> Tool:
    return next(tool for tool in recipe.tools if tool.name == name)


def describe_tools(recipe: Recipe) -> str:
    """``zig 0.17.0 and cargo-zigbuild 0.24.0``, as the recipe pins them."""
    zig, zigbuild = _tool(recipe, "ziglang"), _tool(recipe, "cargo-zigbuild")
    return f"zig {zig.version} and cargo-zigbuild {zigbuild.version}"


def _download(url: str, sha256: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 (https only)
            data: bytes = response.read(_MAX_WHEEL_BYTES + 1)
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or error
        raise RecipeError(f"cannot fetch {url.rsplit('/', 1)[-1]}: {reason}") from error
    if len(data) > _MAX_WHEEL_BYTES or hashlib.sha256(data).hexdigest() != sha256:
        raise RecipeError(
            f"{url.rsplit('/', 1)[-1]} does not have the SHA-256 the recipe pins; nothing was kept"
        )
    return data


def _extract_wheel(data: bytes, into: Path) -> None:
    """Every file of the wheel below ``into`` (no name may leave it); the
    executable bit kept, nothing writable by others."""
    with zipfile.ZipFile(io.BytesIO(data)) as wheel:
        for member in wheel.infolist():
            name = PurePosixPath(member.filename)
            if name.is_absolute() or ".." in name.parts or "\\" in member.filename:
                raise RecipeError(f"a tool wheel holds an unsafe name: {member.filename!r}")
            target = into.joinpath(*name.parts)
            if member.is_dir():
                target.mkdir(mode=0o700, parents=True, exist_ok=True)
                continue
            target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with wheel.open(member) as source, open(target, "xb") as output:
                shutil.copyfileobj(source, output)
            executable = (member.external_attr >> 16) & 0o111
            os.chmod(target, 0o755 if executable else 0o644)


def fetch_tools(recipe: Recipe, folder: Path, say: Callable[[str], None]) -> Tools:
    """zig and cargo-zigbuild for this host in ``folder`` (a private folder of
    the user's): each wheel fetched from PyPI and checked against its SHA-256
    once (saying so), then reused. Raises ``RecipeError``."""
    arch = host_architecture()
    if arch is None:
        raise RecipeError(
            f"the recipe's {describe_tools(recipe)} run on Linux x86_64 and aarch64 only"
        )
    places = {tool.name: _place(folder, tool, arch) for tool in recipe.tools}
    if all((place / _COMPLETE).is_file() for place in places.values()):
        # Reused as they are: nothing is written, so no lock is needed.
        return _programs(recipe, places)
    with _locked(folder):
        return _fetch_tools(recipe, folder, say, arch)


def _place(folder: Path, tool: Tool, arch: str) -> Path:
    """Where ``tool``'s wheel for ``arch`` is extracted (its version and hash in the name)."""
    wheel = tool.wheels.get(arch)
    if wheel is None:
        raise RecipeError(f"the recipe names no {tool.name} wheel for {arch}")
    return folder / f"{tool.name}-{tool.version}-{arch}-{wheel.sha256[:16]}"


def _programs(recipe: Recipe, places: Mapping[str, Path]) -> Tools:
    programs = {
        tool.name: places[tool.name].joinpath(*PurePosixPath(tool.program).parts)
        for tool in recipe.tools
    }
    return Tools(programs["ziglang"], programs["cargo-zigbuild"])


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder/lock`` (two runs never extract the same tool at once)."""
    import fcntl  # Linux only, as the recipe's tools

    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    lock = os.open(folder / "lock", flags, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)


def _fetch_tools(recipe: Recipe, folder: Path, say: Callable[[str], None], arch: str) -> Tools:
    places = {}
    for tool in recipe.tools:
        place = places[tool.name] = _place(folder, tool, arch)
        wheel = tool.wheels[arch]
        if not (place / _COMPLETE).is_file():
            say(f"fetching {tool.name} {tool.version} from PyPI (sha256 {wheel.sha256[:16]}…)")
            data = _download(wheel.url, wheel.sha256)
            shutil.rmtree(place, ignore_errors=True)
            partial = Path(tempfile.mkdtemp(prefix=f".{tool.name}-", dir=folder))
            try:
                _extract_wheel(data, partial)
                (partial / _COMPLETE).write_bytes(wheel.sha256.encode("ascii"))
                os.rename(partial, place)
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
            say(f"fetched {tool.name} {tool.version} into {place}")
    return _programs(recipe, places)


def cargo_home() -> Path:
    """The cargo home cargo uses: ``$CARGO_HOME``, else ``~/.cargo``."""
    home = os.environ.get("CARGO_HOME") or os.path.join(os.path.expanduser("~"), ".cargo")
    return Path(os.path.abspath(home))


def sysroot(channel: str, cwd: Path) -> Path:
    """The sysroot of the toolchain ``channel`` (``rustc --print sysroot``)."""
    environment = {key: value for key, value in os.environ.items() if key != "RUSTC"}
    environment["RUSTUP_TOOLCHAIN"] = channel
    rustc = shutil.which("rustc")
    if rustc is None:
        raise RecipeError("rustc was not found on PATH: install Rust (https://rustup.rs)")
    try:
        found = subprocess.run(
            [rustc, "--print", "sysroot"],
            cwd=cwd,
            env=environment,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise RecipeError(f"rustc of Rust {channel} did not run: {error}") from error
    path = found.stdout.strip()
    if found.returncode != 0 or not os.path.isabs(path):
        raise RecipeError(
            f"Rust {channel} is not installed: install it with "
            f"`rustup toolchain install {channel}`"
        )
    return Path(path)


def check_target_installed(channel: str, root: Path, triple: str) -> None:
    """Refuses, naming the rustup command, when the toolchain lacks ``triple``'s library."""
    if not (root / "lib" / "rustlib" / triple / "lib").is_dir():
        raise RecipeError(
            f"Rust {channel} has no standard library for {triple}: add it with "
            f"`rustup target add --toolchain {channel} {triple}`"
        )


def build_environment(
    recipe: Recipe, tools: Tools, source: Path, toolchain: Path, cache: Path
) -> tuple[dict[str, str], tuple[str, ...]]:
    """The variables the recipe sets for cargo-zigbuild (making ``cache/tmp`` for its
    temporary files), and those it removes.

    The flags travel in ``CARGO_ENCODED_RUSTFLAGS`` (one per field), so a path
    with a space stays one flag.
    """
    remaps = (
        (source, recipe.remapped.source),
        (cargo_home(), recipe.remapped.cargo_home),
        (toolchain, recipe.remapped.sysroot),
    )
    flags = [f"--remap-path-prefix={host}={shown}" for host, shown in remaps]
    variables = {
        "CARGO_ENCODED_RUSTFLAGS": "\x1f".join(flags),
        "SOURCE_DATE_EPOCH": recipe.source_date_epoch,
        "CARGO_ZIGBUILD_ZIG_PATH": str(tools.zig),
        # cargo-zigbuild's wrappers, zig's caches and every temporary file stay
        # in the build (a shared /tmp may not be writable, or not private).
        "XDG_CACHE_HOME": str(cache),
        "ZIG_GLOBAL_CACHE_DIR": str(cache / "zig"),
        "ZIG_LOCAL_CACHE_DIR": str(cache / "zig-local"),
        "TMPDIR": str(cache / "tmp"),
    }
    (cache / "tmp").mkdir(mode=0o700, parents=True, exist_ok=True)
    cleared = (name for name in os.environ if name.startswith(_CLEARED_PREFIXES))
    return variables, (*_CLEARED_VARIABLES, *cleared)


def build_command(
    recipe: Recipe, tools: Tools, manifest: Path, target_dir: Path, triple: str
) -> list[str]:
    """cargo-zigbuild's command line: release, locked, ``triple`` at the recipe's glibc."""
    return [
        str(tools.cargo_zigbuild), "zigbuild", "--release", "--locked", "--bins",
        "--manifest-path", str(manifest),
        f"--target={triple}.{recipe.glibc}",
        "--target-dir", str(target_dir),
    ]  # fmt: skip


def release_folder(target_dir: Path, triple: str) -> Path:
    """Where the build of ``triple`` leaves the binaries."""
    return target_dir / triple / "release"


def toolchain_channel(toolchain_file: bytes) -> str:
    """The channel a ``rust-toolchain.toml`` pins."""
    try:
        toolchain = tomllib.loads(toolchain_file.decode("utf-8")).get("toolchain")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise RecipeError("rust-toolchain.toml cannot be read") from error
    channel = toolchain.get("channel") if isinstance(toolchain, dict) else None
    return _text(channel, "toolchain channel")


def _tools_main(arguments: list[str]) -> int:
    """``cargo xtask setup``: ``tools RECIPE TOOLS`` fetches the recipe's tools
    into TOOLS and prints the path of zig, then of cargo-zigbuild."""
    recipe_file, tools_name = arguments
    recipe = parse_recipe(Path(recipe_file).read_bytes())
    folder = Path(tools_name).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    tools = fetch_tools(recipe, folder, lambda line: print(f"setup: {line}", file=sys.stderr))
    print(f"{tools.zig}\n{tools.cargo_zigbuild}")
    return 0


def _main(arguments: list[str]) -> int:
    """``cargo xtask dist``: RECIPE TARBALL TRIPLE WORK TOOLS builds the binaries
    of TRIPLE from the probe source TARBALL extracted afresh in WORK (cargo's
    target directory there is kept between runs), the tools in TOOLS, and
    prints the folder holding them."""
    recipe_file, tarball, triple, work_name, tools_name = arguments
    recipe = parse_recipe(Path(recipe_file).read_bytes())
    work, tools_folder = Path(work_name).resolve(), Path(tools_name).resolve()
    source = work / "source"
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    tools_folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball, "r:gz") as archive:
        members = archive.getmembers()
        for member in members:
            # The tarball's one top folder becomes `source`.
            member.name = "/".join(member.name.split("/")[1:]) or "."
        archive.extractall(source, members, filter="data")
    # Now, not the tarball's fixed time: cargo, whose target directory is
    # kept, judges the sources by their mtime and must rebuild from these.
    for file in source.rglob("*"):
        os.utime(file)
    channel = toolchain_channel((source / "rust-toolchain.toml").read_bytes())
    tools = fetch_tools(recipe, tools_folder, lambda line: print(f"dist: {line}", file=sys.stderr))
    toolchain = sysroot(channel, work)
    check_target_installed(channel, toolchain, triple)
    variables, cleared = build_environment(recipe, tools, source, toolchain, work / "cache")
    environment = {key: value for key, value in os.environ.items() if key not in cleared}
    environment |= variables | {"RUSTUP_TOOLCHAIN": channel}
    command = build_command(recipe, tools, source / "Cargo.toml", work / "target", triple)
    subprocess.run(command, cwd=work, env=environment, stdin=subprocess.DEVNULL, check=True)
    print(release_folder(work / "target", triple))
    return 0


if __name__ == "__main__":
    try:
        if sys.argv[1:2] == ["tools"]:
            sys.exit(_tools_main(sys.argv[2:]))
        sys.exit(_main(sys.argv[1:]))
    except (RecipeError, subprocess.CalledProcessError, OSError, ValueError) as failure:
        print(f"error: {failure}", file=sys.stderr)
        sys.exit(1)
