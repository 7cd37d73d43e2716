"""What the commands print about a reason code (docs/interfaces.md).

A reason code and, where the probe reported one, the CUDA result become an
explanation and a remedy (``_refusal_text`` holds the texts); the observed
facts that decided a refusal are printed between them. ``explain``,
``preflight`` and ``validate`` print through here, so each says the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from rextio_device_cuda import _refusal_text
from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda._refusal_text import RefusalFacts
from rextio_device_cuda._refusal_text import for_command as for_command

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


def explain_lines(
    refusal: RefusalFacts, *, flags: Mapping[str, str] | None = None
) -> list[str]:
    """A code's explanation, the observed facts that decided it, and its remedy, as printed
    (``_refusal_text.refusal_lines``: at most 100 columns a line).

    ``flags``: the printing command's option for each device option key, so
    that the remedy names what the reader types (``OPTION_FLAGS``).
    """
    return _refusal_text.refusal_lines(refusal, flags=flags)


def code_named(text: str) -> str | None:
    """The reason code ``text`` names in any ASCII case, or None.

    Only ASCII letters fold: ``str.upper`` would also take a dotless i (U+0131) for ``I``.
    """
    if not text.isascii():
        return None
    code = text.upper()
    return code if code in PROVIDER_SPEC.reason_codes else None


def nearest_code(text: str) -> str | None:
    """The reason code spelled most like ``text``, when one is close."""
    import difflib  # only for a code that is not one

    matches = difflib.get_close_matches(text.upper(), PROVIDER_SPEC.reason_codes, n=1)
    return matches[0] if matches else None


def refusal_record(
    refusal: RefusalFacts, status: str, *, flags: Mapping[str, str] | None = None
) -> dict[str, object]:
    """A refusal as ``preflight --json`` prints it (path-free; never a support claim)."""
    code, facts, cuda_result = refusal.reason_code, refusal.facts, refusal.cuda_result
    text = _refusal_text.explanation(code, cuda_result, facts)
    remedy = None if text is None else _refusal_text.remedy_of(refusal, text[1])
    if remedy is not None and flags is not None:
        remedy = for_command(remedy, flags)
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
