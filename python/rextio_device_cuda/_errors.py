"""The one exception type that carries a stable reason code."""

from __future__ import annotations

import errno
import re
from typing import Final

from rextio_device_cuda import _codes
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

# Compiled (and cached by `re`) on first use: a ready report carries no code.
_REASON_CODE: Final[str] = PROVIDER_SPEC.probe_report.reason_code_pattern


def is_reason_code(value: object) -> bool:
    """Whether ``value`` is spelled like a reason code (``^[A-Z][A-Z0-9_]{0,63}$``)."""
    return isinstance(value, str) and re.fullmatch(_REASON_CODE, value, re.ASCII) is not None


class CudaProbeError(RuntimeError):
    """A probe, parser or toolkit refusal with a stable ``reason_code``.

    ``str(error)`` is exactly the reason code, so it is path-free by
    construction, as 0.1.0's was. The explanation from the spec, an
    optional path-free ``detail`` and ``facts`` (a path-free sentence of what
    was observed that decided the refusal, for the human refusal lines only,
    never for a record) are separate attributes.
    """

    def __init__(
        self, reason_code: str, detail: str | None = None, *, facts: str | None = None
    ) -> None:
        if not is_reason_code(reason_code):
            raise ValueError("reason_code must match ^[A-Z][A-Z0-9_]{0,63}$")
        super().__init__(reason_code)
        self.reason_code: Final[str] = reason_code
        self.detail: Final[str | None] = detail
        self.facts: Final[str | None] = facts
        text = _codes.reason_text(reason_code)
        self.explanation: Final[str | None] = text[0] if text is not None else None


def is_path_free(text: str) -> bool:
    """Whether ``text`` holds no path separator: the one test of text a
    refusal line or the ``preflight`` command may show."""
    return "/" not in text and "\\" not in text


def os_error_text(error: OSError) -> str:
    """``ENOEXEC (Exec format error)``: an OS error as a fact, never its file name."""
    name = errno.errorcode.get(error.errno, f"error {error.errno}") if error.errno else "an error"
    text = error.strerror
    if text and is_path_free(text):
        return f"{name} ({text})"
    return name
