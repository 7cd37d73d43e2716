"""What `cargo xtask dist` wrote: four artifacts that
`auditwheel show`, `twine check --strict` and `check-wheel-contents` accept,
the binaries and their recorded digests in the platform wheels, the metadata,
and an sdist that builds the pure wheel again. The directory and the pinned
tools are the ones `cargo xtask setup` names in target/test-paths.json.
"""

from __future__ import annotations

import email
import hashlib
import os
import re
import subprocess
import tarfile
import zipfile
from email.message import Message
from pathlib import Path

import pytest
from cuda_support import SPEC
from sim_namespace import built_path

ROOT = Path(__file__).resolve().parents[2]
NAME = SPEC["distribution"]["import_name"]
VERSION = SPEC["distribution"]["version"]
BINARIES = (SPEC["probe_report"]["probe"], SPEC["smoke"]["probe"])
# ELF e_machine of each platform tag's binaries.
PLATFORMS = {"manylinux_2_17_x86_64": 62, "manylinux_2_17_aarch64": 183}
DIST_INFO = f"{NAME}-{VERSION}.dist-info"


def _dist() -> Path:
    return built_path("dist_dir")


def _tool(name: str, *arguments: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [built_path("dist_tools") / name, *arguments],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": os.environ["PATH"], "NO_COLOR": "1"},
        check=False,
    )


def _wheel_path(tag: str) -> Path:
    return _dist() / f"{NAME}-{VERSION}-py3-none-{tag}.whl"


def _wheel(tag: str) -> zipfile.ZipFile:
    return zipfile.ZipFile(_wheel_path(tag))


def _metadata(wheel: zipfile.ZipFile) -> tuple[Message, str]:
    """The METADATA headers and its body (the long description), as UTF-8."""
    text = wheel.read(f"{DIST_INFO}/METADATA").decode("utf-8")
    return email.message_from_string(text), text.split("\n\n", 1)[1]


def test_dist_wrote_exactly_the_four_artifacts() -> None:
    assert sorted(path.name for path in _dist().iterdir()) == sorted(
        [
            f"{NAME}-{VERSION}.tar.gz",
            f"{NAME}-{VERSION}-py3-none-any.whl",
            *(f"{NAME}-{VERSION}-py3-none-{tag}.whl" for tag in PLATFORMS),
        ]
    )


@pytest.mark.parametrize("tag", sorted(PLATFORMS))
def test_auditwheel_confirms_the_platform_tag(tag: str) -> None:
    shown = _tool("auditwheel", "show", _wheel_path(tag))
    assert shown.returncode == 0, shown.stderr
    # auditwheel wraps its lines; compare with the whitespace collapsed.
    words = " ".join(shown.stdout.split())
    assert f'is consistent with the following platform tag: "{tag}"' in words, shown.stdout
    # The glibc floor: no symbol version newer than 2.17 is referenced.
    versions = re.findall(r"GLIBC_(\d+)\.(\d+)", words)
    assert versions, shown.stdout
    assert max((int(major), int(minor)) for major, minor in versions) <= (2, 17)


def test_twine_check_strict_and_check_wheel_contents_pass() -> None:
    artifacts = sorted(_dist().iterdir())
    checked = _tool("twine", "check", "--strict", *artifacts)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("PASSED") == len(artifacts) == 4, checked.stdout
    wheels = [path for path in artifacts if path.suffix == ".whl"]
    contents = _tool("check-wheel-contents", *wheels)
    assert contents.returncode == 0, contents.stdout + contents.stderr
    assert contents.stdout.count(": OK") == len(wheels) == 3, contents.stdout


@pytest.mark.parametrize("tag", sorted(PLATFORMS))
def test_a_platform_wheel_ships_both_binaries_with_their_digests(tag: str) -> None:
    with _wheel(tag) as wheel:
        assert f"Tag: py3-none-{tag}" in wheel.read(f"{DIST_INFO}/WHEEL").decode().splitlines()
        assert "Root-Is-Purelib: false" in wheel.read(f"{DIST_INFO}/WHEEL").decode()
        shipped = sorted(name for name in wheel.namelist() if f"{NAME}/_bin/" in name)
        assert shipped == sorted(f"{NAME}/_bin/{name}" for name in (*BINARIES, "SHA256SUMS"))
        recorded = wheel.read(f"{NAME}/_bin/SHA256SUMS").decode("ascii")
        lines = []
        for binary in BINARIES:
            member = f"{NAME}/_bin/{binary}"
            data = wheel.read(member)
            # An ELF executable for this platform, installed executable.
            assert data[:4] == b"\x7fELF"
            assert int.from_bytes(data[18:20], "little") == PLATFORMS[tag]
            assert wheel.getinfo(member).external_attr >> 16 == 0o100755
            # The checkout's and cargo home's prefixes were remapped away.
            assert str(ROOT).encode() not in data
            assert b"/.cargo/registry/" not in data
            lines.append(f"{hashlib.sha256(data).hexdigest()}  {binary}\n")
        assert recorded == "".join(sorted(lines, key=lambda line: line.split()[1]))


def test_the_pure_wheel_and_the_sdist_carry_no_binary() -> None:
    with _wheel("any") as wheel:
        assert "Tag: py3-none-any" in wheel.read(f"{DIST_INFO}/WHEEL").decode().splitlines()
        assert not [name for name in wheel.namelist() if "/_bin/" in name]
    with tarfile.open(_dist() / f"{NAME}-{VERSION}.tar.gz") as sdist:
        names = sdist.getnames()
    assert not [name for name in names if "/_bin/" in name]
    top = f"{NAME}-{VERSION}"
    for member in ("PKG-INFO", "README.md", "LICENSE", "pyproject.toml", "hatch_build.py"):
        assert f"{top}/{member}" in names


@pytest.mark.parametrize("tag", ["any", *sorted(PLATFORMS)])
def test_every_wheel_describes_itself(tag: str) -> None:
    with _wheel(tag) as wheel:
        metadata, description = _metadata(wheel)
        license_text = wheel.read(f"{DIST_INFO}/licenses/LICENSE")
    assert (metadata["Name"], metadata["Version"]) == (SPEC["distribution"]["name"], VERSION)
    assert metadata["License-Expression"] == "MIT"
    assert metadata["License-File"] == "LICENSE"
    assert license_text == (ROOT / "LICENSE").read_bytes()
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert description == (ROOT / "README.md").read_text(encoding="utf-8")
    urls = dict(value.split(", ", 1) for value in metadata.get_all("Project-URL", []))
    assert urls["Homepage"] == "https://pypi.org/project/rextio-device-cuda/"
    classifiers = metadata.get_all("Classifier", [])
    assert "Development Status :: 3 - Alpha" in classifiers
    for version in ("3.11", "3.12", "3.13", "3.14"):
        assert f"Programming Language :: Python :: {version}" in classifiers


def _generated_payload() -> dict[str, bytes]:
    """What every artifact carries from generated/, by its path in the package:
    the manifest and each tarball (in ``_data/``), and beside them the build
    recipe of templates/ (``reproduce`` and ``build-probe`` read it)."""
    generated = ROOT / "generated"
    tarballs = sorted(generated.glob("*.tar.gz"))
    assert tarballs, f"{generated} holds no tarball"
    payload = {f"{NAME}/manifest.json": (generated / "manifest.json").read_bytes()}
    payload.update({f"{NAME}/_data/{path.name}": path.read_bytes() for path in tarballs})
    recipe = ROOT / "templates" / "build-recipe.json"
    payload[f"{NAME}/_data/{recipe.name}"] = recipe.read_bytes()
    return payload


@pytest.mark.parametrize("tag", ["any", *sorted(PLATFORMS)])
def test_every_wheel_carries_the_manifest_and_each_generated_tarball(tag: str) -> None:
    with _wheel(tag) as wheel:
        names = wheel.namelist()
        for member, data in _generated_payload().items():
            assert member in names, member
            assert wheel.read(member) == data, member
        shipped = sorted(name for name in names if f"{NAME}/_data/" in name)
    expected = sorted(name for name in _generated_payload() if "/_data/" in name)
    assert shipped == expected


def test_the_sdist_carries_the_manifest_and_each_generated_tarball() -> None:
    top = f"{NAME}-{VERSION}"
    with tarfile.open(_dist() / f"{top}.tar.gz") as sdist:
        for member, data in _generated_payload().items():
            extracted = sdist.extractfile(f"{top}/{member}")
            assert extracted is not None, member
            assert extracted.read() == data, member


def _entries(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_the_sdist_builds_the_pure_wheel_again(tmp_path: Path) -> None:
    python = built_path("build_python")
    with tarfile.open(_dist() / f"{NAME}-{VERSION}.tar.gz") as sdist:
        sdist.extractall(tmp_path, filter="data")
    out = tmp_path / "out"
    built = subprocess.run(
        [
            python,
            "-B",
            "-c",
            "import sys, hatchling.build\nprint(hatchling.build.build_wheel(sys.argv[1]))",
            str(out),
        ],
        cwd=tmp_path / f"{NAME}-{VERSION}",
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    rebuilt = out / built.stdout.strip()
    assert rebuilt.name == f"{NAME}-{VERSION}-py3-none-any.whl"
    assert _entries(rebuilt) == _entries(_dist() / rebuilt.name)
