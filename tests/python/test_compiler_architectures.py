"""The spec's SM facts against NVIDIA's own compilers.

Each pinned compiler from PyPI says which architectures its CUDA release knows:
``ptxas --help`` of ``nvidia-cuda-nvcc-cu12`` (12.x wheels ship no nvcc) and
``nvcc --list-gpu-arch`` of ``nvidia-cuda-nvcc`` (13.x; it prints ``compute_NN``,
the virtual architecture of each ``sm_NN``). The releases are those where the
list changes, each with the release before it on PyPI (there is no 12.7), so every
``first`` and ``last`` of the spec is pinned exactly, plus the newest 13.x.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from functools import cache

import pytest
from cuda_support import SPEC
from nvidia_wheels import COMPILERS_CACHE, REPOSITORY, Wheel, executable_member

from rextio_device_cuda._provider_spec import PROVIDER_SPEC


@dataclass(frozen=True)
class Compiler:
    release: tuple[int, int]
    wheel: Wheel
    program: str


def _cu12(version: str, sha256: str) -> Compiler:
    major, minor, _ = version.split(".")
    return Compiler(
        (int(major), int(minor)),
        Wheel("nvidia-cuda-nvcc-cu12", version, sha256),
        "nvidia/cuda_nvcc/bin/ptxas",
    )


def _cu13(version: str, sha256: str) -> Compiler:
    major, minor, _ = version.split(".")
    return Compiler(
        (int(major), int(minor)), Wheel("nvidia-cuda-nvcc", version, sha256), "nvidia/cu13/bin/nvcc"
    )


# The newest patch of each release on PyPI; in release order.
COMPILERS = (
    _cu12("12.0.140", "958d54df87d0c0b7207e7fed403d6eeda0890a01cc44cfeaccf87c7f90e9b165"),
    _cu12("12.6.85", "d75d9d74599f4d7c0865df19ed21b739e6cb77a6497a3f73d6f61e8038a765e4"),
    _cu12("12.8.93", "2d6dc36fb7cb5ac9c0b8825bc13d193c35487a315664007287d0126531238011"),
    _cu12("12.9.86", "5d6a0d32fdc7ea39917c20065614ae93add6f577d840233237ff08e9a38f58f0"),
    _cu13("13.0.88", "56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03"),
    _cu13("13.3.73", "f483af83166c4fa356a21606076d553b0b4ceaebbd9912e537545080db695bdd"),
    _cu13("13.4.92", "a1f3bfb27299e060b444d5df1f4bcd762501326cf0fd3141ed61756816ab9a0e"),
    # The newest 13.x on PyPI when these pins were taken.
    _cu13("13.5.37", "f5c4f7ead5d964fb4af42bbf1e6d3ec3c1e6e9d83b53749f691d387e7fcaa3a7"),
)

# 0.1.0's vocabulary; every other architecture must be one a 12.8-13.x
# compiler added.
VOCABULARY_0_1_0 = (
    "sm_60",
    "sm_61",
    "sm_70",
    "sm_72",
    "sm_75",
    "sm_80",
    "sm_86",
    "sm_87",
    "sm_89",
    "sm_90",
)

_PTXAS_SM = re.compile(r"\bsm_([0-9]{2,3})\b")
_NVCC_ARCH = re.compile(r"compute_([0-9]{2,3})")


@cache
def listed(compiler: Compiler) -> frozenset[str]:
    """The architectures the compiler knows, as ``sm_NN``."""
    program = executable_member(compiler.wheel, COMPILERS_CACHE, compiler.program)
    argument = "--help" if compiler.program.endswith("ptxas") else "--list-gpu-arch"
    done = subprocess.run(
        [str(program), argument], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    if argument == "--help":
        found = {f"sm_{digits}" for digits in _PTXAS_SM.findall(done.stdout)}
    else:
        lines = done.stdout.split()
        # Every line is one virtual architecture: a new format fails here, not silently.
        assert all(_NVCC_ARCH.fullmatch(line) for line in lines), lines
        found = {f"sm_{_NVCC_ARCH.fullmatch(line)[1]}" for line in lines}  # type: ignore[index]
    assert found, f"{compiler.wheel.package} {compiler.wheel.version} listed no architecture"
    return frozenset(found)


def _known(release: tuple[int, int]) -> frozenset[str]:
    """What the spec says a compiler of ``release`` knows."""
    return frozenset(
        item.sm
        for item in PROVIDER_SPEC.manifest.architectures
        if item.first <= release and (item.last is None or release <= item.last)
    )


VOCABULARY = frozenset(item.sm for item in PROVIDER_SPEC.manifest.architectures)
_IDS = [compiler.wheel.version for compiler in COMPILERS]


@pytest.mark.parametrize("compiler", COMPILERS, ids=_IDS)
def test_the_spec_says_what_each_compiler_knows(compiler: Compiler) -> None:
    assert listed(compiler) & VOCABULARY == _known(compiler.release)


@pytest.mark.parametrize("compiler", COMPILERS, ids=_IDS)
def test_the_vocabulary_holds_every_architecture_a_newer_compiler_added(
    compiler: Compiler,
) -> None:
    # Outside the vocabulary only what CUDA 12.0 already knew and 0.1.0 left out (sm_5x, sm_62).
    assert listed(compiler) - VOCABULARY <= listed(COMPILERS[0]) - set(VOCABULARY_0_1_0)


def test_the_vocabulary_is_0_1_0_s_plus_what_the_12_8_to_13_x_compilers_add() -> None:
    added = frozenset().union(*(listed(compiler) for compiler in COMPILERS)) - listed(COMPILERS[0])
    assert frozenset(VOCABULARY_0_1_0) | added == VOCABULARY
    assert frozenset(VOCABULARY_0_1_0) <= listed(COMPILERS[0])


def test_each_first_and_last_release_is_where_the_compilers_change() -> None:
    releases = [compiler.release for compiler in COMPILERS]
    floor = tuple(SPEC["policy"]["toolkit_version_floor"])
    for item in PROVIDER_SPEC.manifest.architectures:
        if item.first != floor:
            # The first release is measured, and the release before it lacks the SM.
            index = releases.index(item.first)
            assert item.sm in listed(COMPILERS[index]), item
            assert item.sm not in listed(COMPILERS[index - 1]), item
        else:
            assert item.sm in listed(COMPILERS[0]), item
        if item.last is not None:
            index = releases.index(item.last)
            assert item.sm in listed(COMPILERS[index]), item
            assert item.sm not in listed(COMPILERS[index + 1]), item


def test_the_contract_s_examples_hold() -> None:
    by_release = {compiler.release: listed(compiler) for compiler in COMPILERS}
    # 13.x cannot compile sm_70; 12.6 cannot compile sm_120; 12.8 can.
    assert "sm_70" not in by_release[(13, 0)]
    assert "sm_120" not in by_release[(12, 6)]
    assert "sm_120" in by_release[(12, 8)]
    # 13.0 renamed Jetson Thor's sm_101 to sm_110.
    assert "sm_101" in by_release[(12, 9)]
    assert "sm_101" not in by_release[(13, 0)]
    assert "sm_110" in by_release[(13, 0)]


def test_the_remedies_name_the_vocabulary_from_the_spec() -> None:
    raw = SPEC["reason_codes"]
    assert raw["CUDA_ARCHITECTURE_UNSUPPORTED"][1] == (
        f"Use one of {', '.join(item.sm for item in PROVIDER_SPEC.manifest.architectures)}."
    )
    generated = PROVIDER_SPEC.reason_codes
    for code in ("CUDA_ARCHITECTURE_DRIVER_TOO_OLD", "TOOLKIT_ARCHITECTURE_UNSUPPORTED"):
        assert "sm_120" in generated[code][1]
        assert "{" not in generated[code][1]


def test_the_readme_table_says_what_the_spec_says() -> None:
    readme = (REPOSITORY / "README.md").read_text("utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `sm_")]
    table = {}
    for row in rows:
        sm, _products, first, last = (cell.strip() for cell in row.strip("|").split("|"))
        table[sm.strip("`")] = (first, last)

    def text(release: tuple[int, int] | None) -> str:
        return "" if release is None else f"{release[0]}.{release[1]}"

    assert table == {
        item.sm: (text(item.first), text(item.last))
        for item in PROVIDER_SPEC.manifest.architectures
    }
