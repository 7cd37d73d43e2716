"""NVIDIA's real libcuda laid out the way each platform lays
it out, in a private root the tests build and throw away.

A :class:`PrivateRoot` is a tmpfs mounted as a new ``/`` inside a private
mount and PID namespace (``unshare``, as root), entered with ``chroot``:

- ``/usr`` and ``/etc`` are overlays whose lower layer is the host's own
  directory and whose upper layer is a second tmpfs, so the probe, the
  Python interpreter and the libraries they need are the host's, while every
  file a layout adds (``/usr/lib64/libcuda.so.1``, ``/etc/alternatives``)
  lands in the throwaway upper layer;
- ``/nix``, ``/.singularity.d``, ``/run`` and ``/sysroot`` exist only in the
  new root; ``/proc`` is the namespace's own (NVIDIA's 550 and 555 answer
  ``cuInit`` with 304 otherwise) and ``/dev`` a private tmpfs holding only
  ``null`` (run as root, libcuda creates ``/dev/nvidiactl`` there);
- the repository (probe, venv with the wheel) is bind-mounted read-only at
  its own path.

Nothing reaches the host: every mount is in the namespace, every write in a
tmpfs or an overlay's upper layer, and the namespace dies with its init.

Where each layout's facts come from is said beside it (`Platform.source`).

The aarch64 homes (:data:`ARM64_PLATFORMS`) are the same kind of shell steps,
run by tests/emulated in an arm64 chroot under qemu with NVIDIA's arm64
libcuda; they share every layout that both architectures lay out alike.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from real_libcuda import OBSERVED_CUDA_VERSION, DriverImage, RealDriver
from sim_namespace import preflight_argv

# unshare as in sim_namespace: the command is the PID namespace's init, so a
# timeout that kills unshare kills everything left in the namespace.
UNSHARE_FLAGS = ("--mount", "--propagation", "private", "--pid", "--fork", "--kill-child")
SETUP_FAILED = 97
RUN_TIMEOUT_SECONDS = 180
# The NixOS build group (nixos/modules/misc/ids.nix: ids.gids.nixbld = 30000).
NIXBLD_GID = 30000
# Nix store names: 32 characters of Nix's base-32 alphabet, then the name.
NIX_DRIVER_PACKAGE = "/nix/store/0c2mnq4l9pgkx7yh2n1s3s8n9wzvrr1j-nvidia-x11-{version}-6.6.63"
NIX_GRAPHICS_DRIVERS = "/nix/store/8lq0z3sb1iw1h4h2v6c8z4mz9xq6dk2d-graphics-drivers"
NIX_LINK = "/nix/store/.links/1ll5sw6xfk3ylb7y52ydlzd6dv5fsxi2q3gwvyzpz3g0p3r0s6hw"
# An OSTree object name: two hex digits of the checksum, then the other 62.
OSTREE_OBJECT = (
    "ostree/repo/objects/5e/"
    + "4c1a9f0b7d2e3c6a8b9d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d"
    + ".file"
)
ENVIRONMENT = ("PATH=/usr/bin:/bin", "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1")
# Jetson Linux names its driver libcuda.so.1.1 whatever its version.
TEGRA_IMAGE = "libcuda.so.1.1"
# Jetson Thor's driver directory (Jetson Linux 38), reached through driver_root.
JETSON_THOR_DRIVER_ROOT = "/opt/nvidia/l4t-gpu-libs/openrm"
# The layouts a platform needs of its driver: RealDriver (x86_64, with its
# packages) or any DriverImage.
Driver = TypeVar("Driver", bound=DriverImage)


def q(value: str | Path) -> str:
    return shlex.quote(str(value))


def host_state() -> tuple[list[tuple[str, int, int]], str]:
    """The host's /dev (names, modes, device numbers) and its mount table."""
    with os.scandir("/dev") as entries:
        dev = sorted(
            (
                entry.name,
                entry.stat(follow_symlinks=False).st_mode,
                entry.stat(follow_symlinks=False).st_rdev,
            )
            for entry in entries
        )
    return dev, Path("/proc/self/mounts").read_text(encoding="utf-8")


def mount_of(path: str) -> str:
    """A fact: the filesystem type and rw/ro of the mount at ``path`` ($R-relative)."""
    return f'awk -v m="{path}" \'$2 == m {{ split($4, o, ","); print $3, o[1] }}\' /proc/mounts'


@dataclass(frozen=True)
class Layout:
    """Shell steps that build one platform's driver home in the new root.

    In every step ``$R`` is the new root and ``$L`` the layers tmpfs, as
    seen from outside the chroot. ``before_overlays`` runs before ``/usr``
    and ``/etc`` are mounted (an overlay's upper layer may only be written
    then); ``steps`` after; ``in_root`` runs inside the chroot (a package's
    maintainer script); ``last`` after that (remounting read-only).
    ``facts`` are commands whose output the test checks, so a layout that
    is not what it claims fails.
    """

    steps: Sequence[str]
    before_overlays: Sequence[str] = ()
    in_root: Sequence[str] = ()
    last: Sequence[str] = ()
    facts: Sequence[str] = ()
    # Passed to the probe (--driver-root) and the preflight (driver_root).
    driver_root: str | None = None


@dataclass(frozen=True)
class Platform(Generic[Driver]):
    """One driver home and where its layout comes from."""

    name: str
    source: str
    layout: Callable[[Driver], Layout]


@dataclass(frozen=True)
class RootRun:
    """What the probe and the preflight printed in the private root."""

    probe_returncode: int
    probe_stdout: str
    probe_stderr: str
    preflight_returncode: int
    preflight_stdout: str
    preflight_stderr: str
    default_probe_stdout: str
    dev: frozenset[str]
    facts: str


@dataclass
class PrivateRoot:
    """Builds a fresh private root per run below ``workdir``."""

    probe: Path
    python: Path
    repository: Path
    # The interpreter's installation, when it is not below /usr (pyenv's).
    python_home: Path
    unshare: str
    shell: str
    workdir: Path
    _runs: int = field(default=0)

    def run(self, layout: Layout) -> RootRun:
        """Builds ``layout``, then runs the probe and a preflight inside it."""
        self._runs += 1
        scratch = self.workdir / f"root-{self._runs}"
        scratch.mkdir()
        script = scratch / "run.sh"
        script.write_text(self._script(layout, scratch), encoding="utf-8")
        completed = subprocess.run(
            [self.unshare, *UNSHARE_FLAGS, self.shell, str(script)],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_SECONDS,
            check=False,
        )
        if completed.returncode != 0:
            raise AssertionError(
                f"private root setup failed ({completed.returncode}): {completed.stderr}"
            )

        def read(name: str) -> str:
            return (scratch / name).read_text(encoding="utf-8")

        return RootRun(
            probe_returncode=int(read("probe.rc")),
            probe_stdout=read("probe.out"),
            probe_stderr=read("probe.err"),
            preflight_returncode=int(read("preflight.rc")),
            preflight_stdout=read("preflight.out"),
            preflight_stderr=read("preflight.err"),
            default_probe_stdout=read("default-probe.out"),
            dev=frozenset(read("dev.list").split()),
            facts=read("facts.out"),
        )

    def _script(self, layout: Layout, scratch: Path) -> str:
        root, layers = scratch / "root", scratch / "layers"
        repository = self.repository
        setup = [
            "mount --make-rprivate /",
            f"install -d -m 0755 {q(root)} {q(layers)}",
            f"mount -t tmpfs -o mode=0755,size=512m rextio-root {q(root)}",
            f"mount -t tmpfs -o mode=0755,size=512m rextio-layers {q(layers)}",
            "install -d -m 0755 $L/usr/upper $L/usr/work $L/etc/upper $L/etc/work",
            *layout.before_overlays,
            "install -d -m 0755 $R/usr $R/etc $R/proc $R/dev $R/var/lib/dpkg/alternatives "
            "$R/var/lib/dpkg/triggers $R/var/log",
            "install -d -m 1777 $R/tmp",
            "mount -t overlay rextio-usr -o lowerdir=/usr,upperdir=$L/usr/upper,"
            "workdir=$L/usr/work $R/usr",
            "mount -t overlay rextio-etc -o lowerdir=/etc,upperdir=$L/etc/upper,"
            "workdir=$L/etc/work $R/etc",
            *(f"ln -s usr/{name} $R/{name}" for name in ("bin", "lib", "lib64", "sbin")),
            "mount -t proc rextio-proc $R/proc",
            "mount -t tmpfs -o mode=0755,size=1m rextio-dev $R/dev",
            "mknod -m 0666 $R/dev/null c 1 3",
            *(
                step
                for directory in (repository, self.python_home)
                if not directory.is_relative_to("/usr")
                for step in (
                    f"install -d -m 0755 $R{q(directory)}",
                    f"mount --bind {q(directory)} $R{q(directory)}",
                    f"mount -o remount,bind,ro $R{q(directory)}",
                )
            ),
            *layout.steps,
            *(self._chrooted(step) for step in layout.in_root),
            *layout.last,
        ]
        fail = f'{{ echo "rextio-layout: setup failed" >&2; exit {SETUP_FAILED}; }}'
        lines = [
            "set -u",
            f"R={q(root)}",
            f"L={q(layers)}",
            *(f"{step} || {fail}" for step in setup),
        ]
        driver_root = () if layout.driver_root is None else ("--driver-root", layout.driver_root)
        probe = [str(self.probe), *driver_root]
        preflight = [*preflight_argv(str(self.python), self.probe), *driver_root]
        out = q(scratch)
        lines += [
            f"{self._in_root(probe)} >{out}/probe.out 2>{out}/probe.err; echo $? >{out}/probe.rc",
            f"{self._in_root(preflight)} >{out}/preflight.out 2>{out}/preflight.err; "
            f"echo $? >{out}/preflight.rc",
            # The same root without the driver root: what the search alone finds.
            f"{self._in_root([str(self.probe)])} >{out}/default-probe.out 2>/dev/null",
            f"ls -A $R/dev >{out}/dev.list",
            f": >{out}/facts.out",
            *(f"{{ {fact} ; }} >>{out}/facts.out 2>&1" for fact in layout.facts),
        ]
        return "\n".join(lines) + "\n"

    def _in_root(self, argv: Sequence[str]) -> str:
        return f"chroot $R env -i {' '.join(ENVIRONMENT)} {' '.join(map(q, argv))}"

    def _chrooted(self, step: str) -> str:
        return f"chroot $R env -i {' '.join(ENVIRONMENT)} sh -ec {q(step)}"


def _versioned(directory: str, driver: DriverImage, mode: str = "0644") -> list[str]:
    """``directory/libcuda.so.<version>`` plus the ``libcuda.so.1`` link, as
    NVIDIA's .run installer and the distributions' packages make them."""
    versioned = f"libcuda.so.{driver.image_version}"
    return [
        f"install -d -m 0755 $R{directory}",
        f"install -m {mode} {q(driver.image)} $R{directory}/{versioned}",
        f"ln -s {versioned} $R{directory}/libcuda.so.1",
    ]


def debian(driver: RealDriver) -> Layout:
    control = "/tmp/nvidia-alternative.control"
    return Layout(
        steps=(
            # The packages' own files, where dpkg would put them.
            f"dpkg-deb -x {q(driver.deb)} $R",
            f"dpkg-deb -x {q(driver.alternative_deb)} $R",
            f"dpkg-deb -e {q(driver.alternative_deb)} $R{control}",
        ),
        # nvidia-alternative's own postinst, as dpkg runs it when the
        # libcuda1 files trigger it: the real update-alternatives makes
        # /usr/lib/x86_64-linux-gnu/libcuda.so.1 ->
        # /etc/alternatives/nvidia--libcuda.so.1-x86_64-linux-gnu ->
        # /usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1 -> the image.
        in_root=(
            "DPKG_MAINTSCRIPT_PACKAGE=nvidia-alternative DPKG_MAINTSCRIPT_ARCH=amd64 "
            f"DPKG_MAINTSCRIPT_NAME=postinst sh -e {control}/postinst triggered",
        ),
        facts=(
            "readlink $R/usr/lib/x86_64-linux-gnu/libcuda.so.1",
            "readlink $R/etc/alternatives/nvidia--libcuda.so.1-x86_64-linux-gnu",
        ),
    )


def _ubuntu_compute(directory: str, driver: DriverImage) -> Layout:
    """libnvidia-compute-NNN's files in the architecture's multiarch directory."""
    return Layout(
        steps=(*_versioned(directory, driver), f"ln -s libcuda.so.1 $R{directory}/libcuda.so")
    )


def ubuntu(driver: DriverImage) -> Layout:
    return _ubuntu_compute("/usr/lib/x86_64-linux-gnu", driver)


def ubuntu_arm64(driver: DriverImage) -> Layout:
    return _ubuntu_compute("/usr/lib/aarch64-linux-gnu", driver)


def rhel(driver: DriverImage) -> Layout:
    return Layout(steps=_versioned("/usr/lib64", driver, "0755"))


def arch(driver: DriverImage) -> Layout:
    return Layout(steps=_versioned("/usr/lib", driver))


def gke(driver: DriverImage) -> Layout:
    return Layout(
        steps=(
            "install -d -m 0755 $R/usr/local/nvidia",
            *_versioned("/usr/local/nvidia/lib64", driver),
        )
    )


def nvidia_lib(driver: DriverImage) -> Layout:
    return Layout(
        steps=(
            "install -d -m 0755 $R/usr/local/nvidia",
            *_versioned("/usr/local/nvidia/lib", driver),
        )
    )


def wsl2(driver: DriverImage) -> Layout:
    lib = "$R/usr/lib/wsl/lib"
    image = q(driver.image)
    return Layout(
        steps=(
            "install -d -m 0755 $R/usr/lib/wsl",
            f"install -d -m 0555 {lib}",
            f"mount -t tmpfs -o mode=0555,size=128m rextio-wsl-lib {lib}",
            # Copies, not links (ldconfig's "libcuda.so.1 is not a symbolic link").
            *(
                f"install -m 0555 {image} {lib}/{name}"
                for name in ("libcuda.so", "libcuda.so.1", "libcuda.so.1.1")
            ),
        ),
        last=(f"mount -o remount,ro {lib}",),
        facts=(f"stat -c '%F %h %a' {lib}/libcuda.so.1", mount_of(lib)),
    )


def colab(driver: DriverImage) -> Layout:
    return Layout(
        steps=(
            *_versioned("/usr/lib64-nvidia", driver),
            "ln -s libcuda.so.1 $R/usr/lib64-nvidia/libcuda.so",
        )
    )


def nixos(driver: DriverImage) -> Layout:
    package = NIX_DRIVER_PACKAGE.format(version=driver.image_version)
    versioned = f"libcuda.so.{driver.image_version}"
    return Layout(
        steps=(
            "install -d -m 0755 $R/nix $R/nix/store",
            f"mount -t tmpfs -o mode=1775,gid={NIXBLD_GID},size=128m rextio-nix-store $R/nix/store",
            # Store paths are read-only to everyone (0555 directories, 0555/0444 files).
            f"install -d -m 0555 $R{package} $R{package}/lib",
            f"install -m 0555 {q(driver.image)} $R{package}/lib/{versioned}",
            f"ln -s {versioned} $R{package}/lib/libcuda.so.1",
            # hardware.graphics' buildEnv: a link per file into the package.
            f"install -d -m 0555 $R{NIX_GRAPHICS_DRIVERS} $R{NIX_GRAPHICS_DRIVERS}/lib",
            f"ln -s {package}/lib/libcuda.so.1 $R{NIX_GRAPHICS_DRIVERS}/lib/libcuda.so.1",
            # auto-optimise-store: one more hard link under /nix/store/.links.
            "install -d -m 0755 $R/nix/store/.links",
            f"ln $R{package}/lib/{versioned} $R{NIX_LINK}",
            "install -d -m 0755 $R/run",
            "mount -t tmpfs -o mode=0755,size=1m rextio-run $R/run",
            f"ln -s {NIX_GRAPHICS_DRIVERS} $R/run/opengl-driver",
        ),
        last=("mount -o remount,ro $R/nix/store",),
        facts=(
            "stat -c '%U:%g %a' $R/nix/store",
            f"stat -c '%h' $R{package}/lib/{versioned}",
            mount_of("$R/nix/store"),
        ),
    )


def apptainer(driver: DriverImage) -> Layout:
    libs = "$R/.singularity.d/libs"
    return Layout(
        steps=(
            # The host's library, where the host keeps it...
            f"install -d -m 0755 $L/host $R/.singularity.d {libs}",
            f"install -m 0644 {q(driver.image)} $L/host/libcuda.so.{driver.image_version}",
            # ...bound read-only onto its name in the container's libs directory.
            f"touch {libs}/libcuda.so.1",
            f"mount --bind $L/host/libcuda.so.{driver.image_version} {libs}/libcuda.so.1",
            f"mount -o remount,bind,ro {libs}/libcuda.so.1",
        ),
        facts=(mount_of(f"{libs}/libcuda.so.1"), f"stat -c '%h %U' {libs}/libcuda.so.1"),
    )


def ostree(driver: DriverImage) -> Layout:
    versioned = f"libcuda.so.{driver.image_version}"
    return Layout(
        # The deployment's /usr file and the repository object are one inode
        # (OSTree checks deployments out as hard links to its repository),
        # on one filesystem: the layers tmpfs, which also holds /usr's upper layer.
        before_overlays=(
            f"install -d -m 0755 $L/usr/upper/lib64 $L/{Path(OSTREE_OBJECT).parent}",
            f"install -m 0755 {q(driver.image)} $L/{OSTREE_OBJECT}",
            f"ln $L/{OSTREE_OBJECT} $L/usr/upper/lib64/{versioned}",
            f"ln -s {versioned} $L/usr/upper/lib64/libcuda.so.1",
        ),
        steps=(
            "install -d -m 0755 $R/sysroot $R/sysroot/ostree",
            "mount --bind $L/ostree $R/sysroot/ostree",
            "ln -s sysroot/ostree $R/ostree",
        ),
        # OSTree mounts /usr read-only.
        last=("mount -o remount,ro $R/usr",),
        facts=(
            f"stat -c '%h' $R/usr/lib64/{versioned}",
            mount_of("$R/usr"),
        ),
    )


def _tegra(directory: str, driver: DriverImage) -> list[str]:
    """Jetson Linux's nvidia-l4t-cuda: ``libcuda.so.1.1`` with ``libcuda.so.1``
    (ldconfig's link, from the SONAME) and ``libcuda.so`` beside it."""
    return [
        f"install -d -m 0755 $R{directory}",
        f"install -m 0644 {q(driver.image)} $R{directory}/{TEGRA_IMAGE}",
        f"ln -s {TEGRA_IMAGE} $R{directory}/libcuda.so.1",
        f"ln -s {TEGRA_IMAGE} $R{directory}/libcuda.so",
    ]


def jetpack6(driver: DriverImage) -> Layout:
    directory = "/usr/lib/aarch64-linux-gnu/nvidia"
    return Layout(steps=_tegra(directory, driver), facts=(f"readlink $R{directory}/libcuda.so.1",))


def jetpack5(driver: DriverImage) -> Layout:
    directory = "/usr/lib/aarch64-linux-gnu/tegra"
    return Layout(
        steps=(
            *_tegra(directory, driver),
            # The development link one level up points into tegra/; it is no
            # libcuda.so.1, so the multiarch candidate stays empty.
            "ln -s tegra/libcuda.so $R/usr/lib/aarch64-linux-gnu/libcuda.so",
        ),
        facts=(f"readlink $R{directory}/libcuda.so.1",),
    )


def jetson_thor(driver: DriverImage) -> Layout:
    return Layout(
        steps=_tegra(JETSON_THOR_DRIVER_ROOT, driver),
        facts=(f"readlink $R{JETSON_THOR_DRIVER_ROOT}/libcuda.so.1",),
        driver_root=JETSON_THOR_DRIVER_ROOT,
    )


def cuda_compat(driver: DriverImage) -> Layout:
    # The release the series' driver reports (12040 -> cuda-12.4).
    version = OBSERVED_CUDA_VERSION[driver.series]
    release = f"cuda-{version // 1000}.{version % 1000 // 10}"
    compat = f"/usr/local/{release}/compat"
    versioned = f"libcuda.so.{driver.image_version}"
    return Layout(
        steps=(
            f"install -d -m 0755 $R/usr/local/{release} $R{compat}",
            f"install -m 0644 {q(driver.image)} $R{compat}/{versioned}",
            f"ln -s {versioned} $R{compat}/libcuda.so.1",
            f"ln -s libcuda.so.1 $R{compat}/libcuda.so",
            # cuda-toolkit-config-common's alternative: /usr/local/cuda ->
            # /etc/alternatives/cuda -> /usr/local/cuda-12.N.
            f"ln -s /usr/local/{release} $R/etc/alternatives/cuda",
            "ln -s /etc/alternatives/cuda $R/usr/local/cuda",
        ),
        driver_root="/usr/local/cuda/compat",
    )


GKE_SOURCE = "/usr/local/nvidia/lib64, where GKE mounts the installed driver"
NIXOS_SOURCE = (
    "/run/opengl-driver -> a graphics-drivers buildEnv in a root:nixbld 1775, read-only, "
    "optimised (hard-linked) /nix/store"
)
APPTAINER_SOURCE = "/.singularity.d/libs/libcuda.so.1, the host's file bound read-only"

PLATFORMS: tuple[Platform[RealDriver], ...] = (
    Platform(
        "debian",
        "libcuda1 and nvidia-alternative of the series (dpkg-deb -x), and nvidia-alternative's "
        "postinst run as dpkg's trigger runs it",
        debian,
    ),
    Platform(
        "ubuntu",
        "libnvidia-compute-NNN(-server): /usr/lib/x86_64-linux-gnu/libcuda.so.<version> with "
        "libcuda.so.1 and libcuda.so beside it (packages.ubuntu.com file lists)",
        ubuntu,
    ),
    Platform("rhel", "/usr/lib64/libcuda.so.<version> and the libcuda.so.1 link", rhel),
    Platform(
        "arch", "/usr/lib/libcuda.so.<version> and the libcuda.so.1 link (nvidia-utils)", arch
    ),
    Platform("gke", GKE_SOURCE, gke),
    Platform("wsl2", "/usr/lib/wsl/lib: regular-file copies on a read-only mount", wsl2),
    Platform("colab", "/usr/lib64-nvidia/libcuda.so.<version> and its links", colab),
    Platform("nixos", NIXOS_SOURCE, nixos),
    Platform("apptainer", APPTAINER_SOURCE, apptainer),
    Platform(
        "ostree",
        "/usr/lib64 on a read-only /usr whose image is a hard link of a repository object",
        ostree,
    ),
    Platform(
        "cuda-compat",
        "/usr/local/cuda/compat (cuda-compat-12-N) through driver_root",
        cuda_compat,
    ),
)

# The aarch64 homes, in the probe's search order, then
# Jetson Thor through driver_root.
ARM64_PLATFORMS: tuple[Platform[DriverImage], ...] = (
    Platform("gke", GKE_SOURCE, gke),
    Platform(
        "nvidia-lib",
        "/usr/local/nvidia/lib, the driver volume's other directory beside lib64",
        nvidia_lib,
    ),
    Platform(
        "jetpack6",
        "/usr/lib/aarch64-linux-gnu/nvidia/libcuda.so.1.1 and its links (Jetson Linux 36's "
        "nvidia-l4t-cuda; an ld.so.conf.d entry names the directory)",
        jetpack6,
    ),
    Platform(
        "jetpack5",
        "/usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1.1 and its links, and libcuda.so one "
        "level up pointing into tegra/ (Jetson Linux 35's nvidia-l4t-cuda)",
        jetpack5,
    ),
    Platform(
        "ubuntu-arm64",
        "libnvidia-compute-NNN(-server) for arm64: /usr/lib/aarch64-linux-gnu/"
        "libcuda.so.<version> with libcuda.so.1 and libcuda.so beside it",
        ubuntu_arm64,
    ),
    Platform(
        "rhel", "/usr/lib64/libcuda.so.<version> and the libcuda.so.1 link (the sbsa driver)", rhel
    ),
    Platform(
        "arch", "/usr/lib/libcuda.so.<version> and the libcuda.so.1 link (Arch Linux ARM)", arch
    ),
    Platform("nixos", NIXOS_SOURCE, nixos),
    Platform("apptainer", APPTAINER_SOURCE, apptainer),
    Platform(
        "jetson-thor",
        "/opt/nvidia/l4t-gpu-libs/openrm/libcuda.so.1.1 and its links (Jetson Linux 38) "
        "through driver_root",
        jetson_thor,
    ),
)


def expected_facts(platform: str) -> list[str]:
    """What each layout's ``facts`` print, by platform name, on either
    architecture: a layout that is not what it claims fails on them."""
    return {
        "debian": [
            "/etc/alternatives/nvidia--libcuda.so.1-x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu/nvidia/current/libcuda.so.1",
        ],
        # A regular file of one link, on a read-only mount.
        "wsl2": ["regular file 1 555", "tmpfs ro"],
        # root:nixbld 1775; the image has a second link; the store is read-only.
        "nixos": ["root:30000 1775", "2", "tmpfs ro"],
        "apptainer": ["tmpfs ro", "1 root"],
        # The repository object and the deployment's file are one inode, on a read-only /usr.
        "ostree": ["2", "overlay ro"],
        # Jetson Linux's libcuda.so.1 names the libcuda.so.1.1 beside it.
        "jetpack6": [TEGRA_IMAGE],
        "jetpack5": [TEGRA_IMAGE],
        "jetson-thor": [TEGRA_IMAGE],
    }.get(platform, [])
