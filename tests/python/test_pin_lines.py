"""The rextio.toml lines the commands print: TOML reads back the path, or the path is refused.

A file name that is not UTF-8 is made for real (bytes 0xff) and handed to
``pin-probe`` as bytes, the way a shell would; names TOML must escape (a
quote, a backslash, control characters, DEL, characters past the BMP) are
printed escaped, and tomllib reads each back to the very path.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from cuda_support import ProbeFactory, report

import rextio_device_cuda
from rextio_device_cuda._pin_text import PathNotTomlError, pin_lines, toml_string


def _pin_probe(path: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"rextio_device_cuda", b"pin-probe", path],
        capture_output=True,
        timeout=60,
        cwd=cwd,
        check=False,
    )


def test_a_path_that_is_not_utf8_is_refused_with_a_clear_error(
    probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.binary(report())
    name = b"probe-\xff\xfe"
    os.link(probe, os.path.join(os.fsencode(tmp_path), name))
    done = _pin_probe(os.path.join(os.fsencode(tmp_path), name), tmp_path)
    assert done.returncode == 2
    assert done.stdout == b""
    error = done.stderr.decode("utf-8")
    assert "Traceback" not in error
    assert "not UTF-8" in error
    assert "rextio.toml" in error


def test_a_utf8_path_toml_must_escape_is_read_back_exactly(
    probes: ProbeFactory, tmp_path: Path
) -> None:
    probe = probes.binary(report())
    folder = tmp_path / 'quote" back\\slash tab\t bell\x07 del\x7f é 😀'
    folder.mkdir()
    pinned = folder / "probe"
    os.link(probe, pinned)
    done = _pin_probe(os.fsencode(pinned), tmp_path)
    assert done.returncode == 0, done.stderr
    # Plain ASCII whatever the terminal's encoding.
    lines = done.stdout.decode("ascii").splitlines()
    digest = hashlib.sha256(pinned.read_bytes()).hexdigest()
    assert lines[0] == digest
    assert tomllib.loads("\n".join(lines[1:])) == {
        "probe_executable": str(pinned),
        "probe_sha256": digest,
    }


@pytest.mark.parametrize(
    "path",
    ["/plain/path", '/a"b', "/a\\b", "/tab\there", "/nl\nhere", "/\x00\x1f\x7f", "/é/😀/\u2028"],
)
def test_toml_string_round_trips(path: str) -> None:
    assert tomllib.loads(f"value = {toml_string(path)}") == {"value": path}
    assert toml_string(path).isascii()


def test_a_surrogate_escaped_path_has_no_toml_spelling() -> None:
    path = os.fsdecode(b"/tmp/probe-\xff")
    with pytest.raises(PathNotTomlError, match="not UTF-8"):
        toml_string(path)
    with pytest.raises(PathNotTomlError):
        pin_lines(path, "0" * 64)


def test_probe_installed_below_a_path_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    # The installed package (its shipped probe in _bin/) copied below a folder
    # whose name is not UTF-8, and imported from there.
    site = os.path.join(os.fsencode(tmp_path), b"site-\xff")
    installed = Path(rextio_device_cuda.__file__).resolve().parent
    shutil.copytree(installed, Path(os.fsdecode(site)) / "rextio_device_cuda")
    done = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"rextio_device_cuda", b"probe"],
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
        env={b"PATH": os.environb[b"PATH"], b"PYTHONPATH": site},
        check=False,
    )
    assert (done.returncode, done.stdout) == (1, b"")
    assert done.stderr.startswith(b"error: the path ")
    assert b"not UTF-8" in done.stderr
    assert b"Traceback" not in done.stderr
