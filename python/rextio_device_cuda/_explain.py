"""What the commands print about a reason code (docs/interfaces.md).

A reason code and, where the probe reported one, the CUDA result become an
explanation and a remedy (``_refusal_text`` holds the texts); the observed
facts that decided a refusal are printed between them. ``explain``,
``preflight`` and ``validate`` print through here, so each says the same.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from rextio_device_cuda import _refusal_text
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

_PROVIDER_ID: Final = PROVIDER_SPEC.manifest.provider_id
_KEYS: Final = PROVIDER_SPEC.option_keys
# The command-line option of ``preflight`` and ``validate`` that sets each
# device option; their remedies name these instead of rextio.toml's keys.
OPTION_FLAGS: Final[Mapping[str, str]] = {
    _KEYS.probe: "--probe",
    _KEYS.probe_sha256: "--probe-sha256",
    _KEYS.device: "--device",
    _KEYS.sm: "--sm",
    _KEYS.toolkit: "--toolkit-root",
    _KEYS.driver_root: "--driver-root",
}


def _key_pattern(key: str) -> re.Pattern[str]:
    # The key as a word of its own, with or without its table's name.
    return re.compile(rf"(?<![\w.-])(?:device_options\.)?{re.escape(key)}(?![\w-])")


_KEY_PATTERNS: Final = {key: _key_pattern(key) for key in OPTION_FLAGS}


def for_command(remedy: str, flags: Mapping[str, str]) -> str:
    """``remedy`` with each device option key it names replaced by its command-line flag."""
    for key, flag in flags.items():
        remedy = _KEY_PATTERNS[key].sub(flag, remedy)
    return remedy


def explain_lines(
    code: str,
    facts: str | None = None,
    cuda_result: int | None = None,
    *,
    flags: Mapping[str, str] | None = None,
) -> list[str]:
    """A code's explanation, the observed facts that decided it, and its remedy, as printed.

    ``flags``: the printing command's option for each device option key, so
    that the remedy names what the reader types (``OPTION_FLAGS``).
    """
    text = _refusal_text.explanation(code, cuda_result, facts)
    if text is None:
        lines = [f"{code}: not a reason code of {_PROVIDER_ID}"]
    else:
        lines = [f"{code}: {text[0]}"]
    if facts:
        lines.append(f"observed: {facts}")
    if text is not None:
        remedy = text[1] if flags is None else for_command(text[1], flags)
        lines.append(f"remedy: {remedy}")
    return lines


def code_named(text: str) -> str | None:
    """The reason code ``text`` names in any case, or None."""
    code = text.upper()
    return code if code in PROVIDER_SPEC.reason_codes else None


def nearest_code(text: str) -> str | None:
    """The reason code spelled most like ``text``, when one is close."""
    import difflib  # only for a code that is not one

    matches = difflib.get_close_matches(text.upper(), PROVIDER_SPEC.reason_codes, n=1)
    return matches[0] if matches else None


def refusal_record(
    code: str,
    status: str,
    facts: str | None,
    cuda_result: int | None,
    *,
    flags: Mapping[str, str] | None = None,
) -> dict[str, object]:
    """A refusal as ``preflight --json`` prints it (path-free; never a support claim)."""
    text = _refusal_text.explanation(code, cuda_result, facts)
    remedy = None if text is None else text[1] if flags is None else for_command(text[1], flags)
    return {
        "status": status,
        "reason_code": code,
        "explanation": text[0] if text else None,
        "remedy": remedy,
        "observed": facts,
        "cuda_result": cuda_result,
        "cuda_result_name": (
            _refusal_text.result_name(cuda_result) if cuda_result is not None else None
        ),
        "support_claim": False,
    }
