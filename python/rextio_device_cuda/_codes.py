"""Names for the reason codes the provider logic branches on.

Each code of the spec is a name here, generated into ``_reason_codes`` (so a
misspelt or removed code fails type checking and import, not silently). A
framework lane's codes are fields of its record (``lane.reason_codes``).
"""

from __future__ import annotations

from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda._reason_codes import *  # noqa: F403


def known_code(code: str) -> str:
    """Return ``code`` if the spec explains it; fail loudly on a typo."""
    if code not in PROVIDER_SPEC.reason_codes:
        raise KeyError(f"reason code {code} is not in the provider spec")
    return code


def reason_text(code: str) -> tuple[str, str] | None:
    """The (explanation, remedy) for a code, or None for an unknown code."""
    return PROVIDER_SPEC.reason_codes.get(code)
