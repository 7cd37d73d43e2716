"""What the commands print about a reason code (contract section 9.6).

A reason code and, where the probe reported one, the CUDA result become an
explanation and a remedy (``_refusal_text`` holds the texts); the observed
facts that decided a refusal are printed between them. ``explain``,
``preflight`` and ``validate`` print through here, so each says the same.
"""

from __future__ import annotations

from typing import Final

from rextio_device_cuda import _refusal_text
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

_PROVIDER_ID: Final = PROVIDER_SPEC.manifest.provider_id


def explain_lines(code: str, facts: str | None = None, cuda_result: int | None = None) -> list[str]:
    """A code's explanation, the observed facts that decided it, and its remedy, as printed."""
    text = _refusal_text.explanation(code, cuda_result)
    if text is None:
        lines = [f"{code}: not a reason code of {_PROVIDER_ID}"]
    else:
        lines = [f"{code}: {text[0]}"]
    if facts:
        lines.append(f"observed: {facts}")
    if text is not None:
        lines.append(f"remedy: {text[1]}")
    return lines


def refusal_record(
    code: str, status: str, facts: str | None, cuda_result: int | None
) -> dict[str, object]:
    """A refusal as ``preflight --json`` prints it (path-free; never a support claim)."""
    text = _refusal_text.explanation(code, cuda_result)
    return {
        "status": status,
        "reason_code": code,
        "explanation": text[0] if text else None,
        "remedy": text[1] if text else None,
        "observed": facts,
        "cuda_result": cuda_result,
        "cuda_result_name": (
            _refusal_text.result_name(cuda_result) if cuda_result is not None else None
        ),
        "support_claim": False,
    }
