"""The lines ``probe``, ``pin-probe`` and ``build-probe`` print to pin a probe.

A path goes into rextio.toml as a TOML basic string. TOML holds Unicode
text only: a path whose bytes are not UTF-8 (Python carries them as lone
surrogates) has no TOML spelling, so it is refused, never printed as a
string TOML would reject.
"""

from __future__ import annotations

from typing import Final

from rextio_device_cuda._provider_spec import PROVIDER_SPEC

# The characters a TOML basic string must escape: the quote, the backslash
# and the control characters (U+0000..U+001F and U+007F).
_SHORT_ESCAPES: Final = {'"': '\\"', "\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


class PathNotTomlError(ValueError):
    """A path TOML cannot hold (bytes that are not UTF-8)."""


def _escaped(character: str) -> str:
    short = _SHORT_ESCAPES.get(character)
    if short is not None:
        return short
    point = ord(character)
    if point < 0x20 or point == 0x7F:
        return f"\\u{point:04X}"
    if point > 0x7E:
        # Escaped so the line is plain ASCII whatever the terminal's encoding.
        return f"\\u{point:04X}" if point <= 0xFFFF else f"\\U{point:08X}"
    return character


def toml_string(path: str) -> str:
    """``path`` as a TOML basic string; ``PathNotTomlError`` when TOML cannot hold it."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as error:
        raise PathNotTomlError(
            f"the path {path!a} holds bytes that are not UTF-8, and rextio.toml (TOML) "
            "holds only UTF-8 text: move or rename it to a UTF-8 path"
        ) from error
    return '"' + "".join(_escaped(character) for character in path) + '"'


def pin_lines(path: str, digest: str) -> list[str]:
    """The ``[target.device_options]`` lines that select and pin the probe at ``path``."""
    keys = PROVIDER_SPEC.option_keys
    return [
        "# rextio.toml, under [target.device_options]:",
        f"{keys.probe} = {toml_string(path)}",
        f'{keys.probe_sha256} = "{digest}"',
    ]


def binary_lines(label: str, path: str, digest: str, note: str) -> list[str]:
    """``probe: PATH`` and ``sha256: DIGEST (NOTE)``, as ``probe`` and ``build-probe`` print."""
    return [f"{label}: {path}", f"sha256: {digest} ({note})"]
