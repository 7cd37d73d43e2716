"""The probe and smoke a platform wheel ships.

A platform wheel carries them in ``rextio_device_cuda/_bin/`` beside
``SHA256SUMS``, the digest of each written when the wheel was built; the pure
wheel carries neither. Nothing here searches anywhere else: the provider
never runs a probe it was not given, and ``python -m rextio_device_cuda
probe`` only prints this path and digest for the user to paste.

This module imports nothing but the standard library: the wheel's build hook
(``hatch_build.py``) reads ``BIN_DIR`` and ``DIGESTS`` from this file.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Final, NamedTuple

BIN_DIR: Final = "_bin"
DIGESTS: Final = "SHA256SUMS"
# One `sha256sum` line: 64 lowercase hex digits, two spaces, a file name.
_LINE: Final = re.compile(r"(?P<digest>[0-9a-f]{64})  (?P<name>[A-Za-z0-9._-]{1,64})")
# What `probe` and `validate` say where no binary ships.
NO_SHIPPED_PROBE: Final = (
    "no probe ships for this platform: this installation carries none (the pure "
    "py3-none-any wheel; the manylinux_2_17 x86_64 and aarch64 wheels carry one). "
    "Build the reviewed probe and smoke from the sources this package carries, with "
    "Rust's cargo: `python -m rextio_device_cuda build-probe` prints their paths, "
    "the lines that pin the probe and the validate command with both digests."
)


class ShippedBinaryError(Exception):
    """The installed package carries no such binary, or not the one it recorded."""


class NoShippedBinariesError(ShippedBinaryError):
    """This installation carries no binaries at all: the pure wheel."""


class Binary(NamedTuple):
    """A binary and the SHA-256 of its bytes (64 lowercase hex digits): what the
    wheel ships, what ``build-probe`` wrote, what ``validate`` runs pinned. It
    lives here because ``hatch_build`` loads this module alone (stdlib only)."""

    path: Path
    sha256: str


def shipped_binary(name: str) -> Binary:
    """The installed ``_bin/<name>``, checked against ``SHA256SUMS``.

    Raises ``ShippedBinaryError`` when this installation ships no binaries
    (the pure wheel), does not record ``name``, or the file's bytes are not
    the recorded ones.
    """
    directory = Path(__file__).resolve().parent / BIN_DIR
    recorded = _recorded_digests(directory / DIGESTS)
    if name not in recorded:
        raise ShippedBinaryError(f"this installation records no {name}")
    path = directory / name
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as error:
        raise ShippedBinaryError(
            f"{name} is recorded but cannot be read ({error.strerror}); reinstall the wheel"
        ) from error
    if digest != recorded[name]:
        raise ShippedBinaryError(
            f"{name} has SHA-256 {digest}, not the {recorded[name]} the wheel recorded; "
            "reinstall the wheel"
        )
    return Binary(path, digest)


def _recorded_digests(digests: Path) -> dict[str, str]:
    try:
        text = digests.read_text(encoding="ascii")
    except FileNotFoundError as error:
        raise NoShippedBinariesError("this installation ships no binaries") from error
    except (OSError, UnicodeDecodeError) as error:
        message = f"{BIN_DIR}/{DIGESTS} cannot be read; reinstall the wheel"
        raise ShippedBinaryError(message) from error
    return parse_digests(text)


def parse_digests(text: str) -> dict[str, str]:
    """The digest of each name in ``SHA256SUMS`` text (``sha256sum``'s lines)."""
    recorded: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.fullmatch(line)
        if match is None or match["name"] in recorded:
            raise ShippedBinaryError(f"{BIN_DIR}/{DIGESTS} is malformed; reinstall the wheel")
        recorded[match["name"]] = match["digest"]
    return recorded
