"""Helpers for the emulated tests: an arm64 chroot run under qemu, and a Wine prefix.

The arm64 chroot is built fresh for every run on a tmpfs inside a private
mount and PID namespace (``unshare``, as root, like tests/e2e): the arm64
``libc6`` and ``libgcc-s1`` trees, NVIDIA's arm64 ``libcuda`` laid out as one
platform lays it out (a ``Layout`` of
tests/real_driver/platform_layouts.py, its steps run with ``$R`` the chroot
and ``$L`` a second tmpfs), the emulator, the binary under test, the
namespace's own ``/proc`` and a ``/dev`` holding only ``null``. The emulator
is run explicitly: no binfmt handler is registered anywhere.

The Wine prefix lives under ``target/`` (created once with ``wineboot``);
every run starts its own wineserver inside a PID namespace, so nothing Wine
starts outlives the run.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import struct
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PureWindowsPath

import pytest
from platform_layouts import Layout
from sim_namespace import (
    RUN_TIMEOUT_SECONDS,
    SETUP_FAILED,
    UNSHARE_FLAGS,
    NamespaceRun,
    built_path,
)

# The command that stages what these tests use and names it in
# target/test-paths.json (xtask/src/emulated.rs).
STAGED_BY = "cargo xtask emulated"

# ELF e_machine of aarch64.
EM_AARCH64 = 183
# The driver series Debian builds for arm64 (xtask/src/emulated.rs fetches each).
ARM64_SERIES = ["535", "550"]
# qemu 7.2 (bookworm's) answers EINVAL to PR_SET_CHILD_SUBREAPER, which the
# probe and smoke call to contain what the driver spawns.
FIRST_QEMU_WITH_SUBREAPER = 10
# A chroot without any driver.
NO_DRIVER = Layout(steps=())
QEMU_IN_CHROOT = "/usr/libexec/rextio/qemu-aarch64"
BINARY_DIR_IN_CHROOT = "/opt/rextio"


@dataclass(frozen=True)
class Arm64Driver:
    """One fetched arm64 libcuda1: its series, versions and extracted image."""

    series: str
    package_version: str
    image_version: str
    image: Path


@dataclass(frozen=True)
class Emulated:
    """What `cargo xtask test` fetched for the arm64 chroot."""

    qemu: Path
    qemu_package_version: str
    userland: tuple[Path, ...]
    drivers: dict[str, Arm64Driver]


def staged_emulated() -> Emulated:
    """The manifest of what was fetched; fails (never skips) when it is missing."""
    manifest = built_path("emulated", STAGED_BY)
    entries = json.loads(manifest.read_text(encoding="utf-8"))
    drivers = {
        entry["series"]: Arm64Driver(
            series=entry["series"],
            package_version=entry["package_version"],
            image_version=entry["image_version"],
            image=Path(entry["image"]),
        )
        for entry in entries["drivers"]
    }
    return Emulated(
        qemu=Path(entries["qemu"]),
        qemu_package_version=entries["qemu_package_version"],
        userland=tuple(Path(tree) for tree in entries["userland"]),
        drivers=drivers,
    )


def staged_binary(key: str) -> Path:
    """A built binary (or the Wine loader) named in target/test-paths.json."""
    path = built_path(key, STAGED_BY)
    if not path.is_file():
        pytest.fail(f"target/test-paths.json names {path} as {key}, which is not a file")
    return path


def elf_machine(path: Path) -> int:
    """The ``e_machine`` of a little-endian ELF file."""
    with path.open("rb") as file:
        header = file.read(20)
    assert header[:4] == b"\x7fELF", f"{path} is not an ELF file"
    assert header[5] == 1, f"{path} is not little-endian"
    (machine,) = struct.unpack_from("<H", header, 18)
    return int(machine)


def qemu_major_version(qemu: Path) -> int:
    """The major version ``qemu --version`` prints."""
    completed = subprocess.run(
        [str(qemu), "--version"], capture_output=True, text=True, timeout=30, check=True
    )
    found = re.search(r"version (\d+)\.", completed.stdout)
    assert found is not None, completed.stdout
    return int(found.group(1))


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is needed by the emulated tests")
    return path


@dataclass(frozen=True)
class ChrootRun:
    """One run in the chroot: what the binary printed, the chroot's /dev
    after, and what the layout's ``facts`` commands printed."""

    run: NamespaceRun
    dev: frozenset[str]
    facts: str


class Arm64Chroot:
    """Runs an aarch64 binary under qemu in a fresh arm64 chroot."""

    def __init__(self, emulated: Emulated, workdir: Path) -> None:
        self._emulated = emulated
        self._workdir = workdir
        self._runs = 0
        self._unshare = _tool("unshare")
        self._shell = _tool("sh")
        self._chroot = _tool("chroot")
        self._env = _tool("env")

    def run(self, layout: Layout, binary: Path, args: Sequence[str]) -> ChrootRun:
        """Runs ``binary args`` in a chroot holding ``layout``."""
        if layout.before_overlays or layout.in_root:
            # The chroot has no overlays, and no shell of its own architecture.
            raise ValueError("an arm64 layout has only steps, last and facts")
        self._runs += 1
        scratch = self._workdir / f"chroot-{self._runs}"
        root, layers = scratch / "root", scratch / "layers"
        root.mkdir(parents=True)
        layers.mkdir()
        dev_list, facts = scratch / "dev.txt", scratch / "facts.txt"
        script = scratch / "run.sh"
        script.write_text(
            self._script(root, layers, layout, binary, args, (dev_list, facts)), encoding="utf-8"
        )
        completed = subprocess.run(
            [self._unshare, *UNSHARE_FLAGS, self._shell, str(script)],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_SECONDS,
            check=False,
        )
        if completed.returncode == SETUP_FAILED:
            pytest.fail(f"arm64 chroot setup failed: {completed.stderr}")

        def read(path: Path) -> str:
            return path.read_text(encoding="utf-8") if path.exists() else ""

        return ChrootRun(
            NamespaceRun(completed.returncode, completed.stdout, completed.stderr, ()),
            frozenset(read(dev_list).split()),
            read(facts),
        )

    def _script(
        self,
        root: Path,
        layers: Path,
        layout: Layout,
        binary: Path,
        args: Sequence[str],
        outputs: tuple[Path, Path],
    ) -> str:
        q = shlex.quote
        dev_list, facts = (q(str(path)) for path in outputs)
        steps = [
            "mount --make-rprivate /",
            "mount -t tmpfs -o mode=0755,size=256m rextio-arm64 $R",
            "mount -t tmpfs -o mode=0755,size=256m rextio-layers $L",
            "install -d -m 0755 $R/usr/lib/aarch64-linux-gnu $R/usr/libexec/rextio "
            f"$R{BINARY_DIR_IN_CHROOT} $R/proc $R/dev",
            # The merged-/usr layout: the interpreter is /lib/ld-linux-aarch64.so.1.
            "ln -s usr/lib $R/lib",
        ]
        for tree in self._emulated.userland:
            t = q(str(tree))
            steps.append(f"if [ -d {t}/lib ]; then cp -a {t}/lib/. $R/usr/lib/; fi")
            steps.append(f"if [ -d {t}/usr ]; then cp -a {t}/usr/. $R/usr/; fi")
        inside = f"{BINARY_DIR_IN_CHROOT}/{binary.name}"
        steps += [
            *layout.steps,
            f"install -m 0755 {q(str(self._emulated.qemu))} $R{QEMU_IN_CHROOT}",
            f"install -m 0755 {q(str(binary))} $R{q(inside)}",
            # The namespace's own PID view (NVIDIA's 550 answers 304 otherwise).
            "mount -t proc rextio-proc $R/proc",
            "mknod -m 0666 $R/dev/null c 1 3",
            *layout.last,
        ]
        fail = f'{{ echo "rextio-emulated: chroot setup failed" >&2; exit {SETUP_FAILED}; }}'
        setup = "\n".join(f"{step} || {fail}" for step in steps)
        command = " ".join(
            [
                *(q(part) for part in [self._env, "-i", self._chroot]),
                '"$R"',
                *(q(part) for part in [QEMU_IN_CHROOT, inside, *args]),
            ]
        )
        return "\n".join(
            [
                "umask 022",
                f"R={q(str(root))}",
                f"L={q(str(layers))}",
                setup,
                command,
                "status=$?",
                f"ls -A $R/dev > {dev_list}",
                f": > {facts}",
                *(f"{{ {fact} ; }} >> {facts} 2>&1" for fact in layout.facts),
                'exit "$status"',
                "",
            ]
        )


# Where each copy of the simulated nvcuda.dll reads its config and logs its
# calls: beside itself (tests/sim-driver, Windows).
SIM_CONFIG_NAME = "rextio-sim.config"
SIM_CALL_LOG_NAME = "rextio-sim.calls.log"
NVCUDA = "nvcuda.dll"
# Wine's options for an unattended prefix: no debug noise, and no Mono or
# Gecko installer prompts.
WINE_QUIET = {"WINEDEBUG": "-all", "WINEDLLOVERRIDES": "mscoree,mshtml="}
# Written once the prefix is complete, naming the Wine that made it; a prefix
# without it, or made by another Wine, is made again.
PREFIX_READY = "rextio-prefix-ready"
WINE_TIMEOUT_SECONDS = 180


class WinePrefix:
    """A 64-bit Wine prefix under target/ and the runs in it."""

    def __init__(self, wine: Path, prefix: Path) -> None:
        self.wine = wine
        self.prefix = prefix
        self._unshare = _tool("unshare")

    @property
    def drive_c(self) -> Path:
        return self.prefix / "drive_c"

    @property
    def system32(self) -> Path:
        return self.drive_c / "windows" / "system32"

    def host_path(self, windows_path: str) -> Path:
        """The file under the prefix that ``C:\\...`` names."""
        parts = PureWindowsPath(windows_path).parts
        assert parts[0].upper() == "C:\\", windows_path
        return self.drive_c.joinpath(*parts[1:])

    def _environment(self, winepath: str | None) -> dict[str, str]:
        environment = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.prefix.parent),
            "WINEPREFIX": str(self.prefix),
            "WINEARCH": "win64",
            **WINE_QUIET,
        }
        if winepath is not None:
            # Wine appends WINEPATH to the Windows PATH of every process.
            environment["WINEPATH"] = winepath
        return environment

    def _version(self) -> str:
        completed = subprocess.run(
            [str(self.wine), "--version"],
            capture_output=True,
            text=True,
            timeout=WINE_TIMEOUT_SECONDS,
            check=True,
        )
        return completed.stdout.strip()

    def ensure(self) -> None:
        """Creates the prefix once per Wine version (``wineboot --init``, then
        waits for its server to save it)."""
        version = self._version()
        ready = self.prefix / PREFIX_READY
        if ready.exists() and ready.read_text(encoding="utf-8") == version:
            return
        if self.prefix.exists():
            shutil.rmtree(self.prefix)
        self.prefix.mkdir(parents=True)
        environment = self._environment(None)
        for argv in ([str(self.wine), "wineboot", "--init"], [str(self._wineserver()), "-w"]):
            completed = subprocess.run(
                argv,
                env=environment,
                capture_output=True,
                text=True,
                timeout=WINE_TIMEOUT_SECONDS,
                check=False,
            )
            if completed.returncode != 0:
                pytest.fail(f"creating the Wine prefix failed: {argv}: {completed.stderr}")
        if not self.system32.is_dir():
            pytest.fail(f"wineboot made no {self.system32}")
        ready.write_text(version, encoding="utf-8")

    def _wineserver(self) -> Path:
        # Debian installs the server beside the loader (/usr/lib/wine/).
        return self.wine.with_name("wineserver")

    def run(self, argv: Sequence[str], cwd: Path, winepath: str | None) -> NamespaceRun:
        """Runs a Windows program; its wineserver and every process it started
        die with the PID namespace when it ends."""
        completed = subprocess.run(
            [self._unshare, *UNSHARE_FLAGS, str(self.wine), *argv],
            env=self._environment(winepath),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=WINE_TIMEOUT_SECONDS,
            check=False,
        )
        return NamespaceRun(completed.returncode, completed.stdout, completed.stderr, ())


# Rust's standard library (1.78 and later) imports ProcessPrng from
# bcryptprimitives.dll, which Windows 8 and later have and Wine 8.0 (Debian
# bookworm's) lacks; Wine 9 has it. Without it no Rust program starts.
PRNG_SHIM_SOURCE = Path(__file__).resolve().parent / "wine_shim" / "bcryptprimitives.c"
PRNG_SHIM_DLL = "bcryptprimitives.dll"


def provide_process_prng(prefix: WinePrefix, workdir: Path) -> None:
    """Builds the ProcessPrng shim with mingw-w64 into System32 when Wine has none."""
    target = prefix.system32 / PRNG_SHIM_DLL
    if target.exists():
        return
    built = workdir / PRNG_SHIM_DLL
    subprocess.run(
        [
            _tool("x86_64-w64-mingw32-gcc"),
            *("-O2", "-shared", "-s", "-o", str(built)),
            *(str(PRNG_SHIM_SOURCE), "-ladvapi32"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    shutil.copyfile(built, target)


def install_sim_nvcuda(sim_driver: Path, directory: Path, config: Sequence[str]) -> None:
    """A copy of the simulated driver as ``directory/nvcuda.dll`` with its own config."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(sim_driver, directory / NVCUDA)
    (directory / SIM_CONFIG_NAME).write_text(
        "".join(f"{line}\n" for line in config), encoding="utf-8"
    )


def call_log(directory: Path) -> list[str] | None:
    """The lines the copy of nvcuda.dll in ``directory`` logged; ``None`` if it never loaded."""
    log = directory / SIM_CALL_LOG_NAME
    if not log.exists():
        return None
    return log.read_text(encoding="utf-8").splitlines()


def called_symbols(lines: Sequence[str]) -> list[str]:
    """The driver functions in a call log, in order (the ``loaded`` line left out)."""
    return [line.split(" ", 1)[0] for line in lines if not line.startswith("loaded ")]
