"""What a person reads about a refusal: its explanation, remedy and observed facts.

Imported only when a refusal is logged or explained (the CUDA result names,
every CUresult of NVIDIA's cuda.h, are of no use to a ready preflight).
Records never carry any of this: they hold the reason code alone.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from rextio_device_cuda import _codes
from rextio_device_cuda._cuda_results import CUDA_RESULT_REMEDIES, CUDA_RESULTS
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

EXPLAIN_COMMAND: Final = "python -m rextio_device_cuda explain"
_PROVIDER_ID: Final = PROVIDER_SPEC.manifest.provider_id
_NAMES: Final[dict[int, str]] = {value: name for name, value in CUDA_RESULTS.items()}
# The probe's codes whose report carries the driver's CUDA result.
RESULT_CODES: Final[frozenset[str]] = frozenset(
    PROVIDER_SPEC.probe_report.cuda_result_reason_codes
)


def result_name(value: int) -> str | None:
    """The cuda.h name of a CUresult value, or None for a value cuda.h does not define."""
    return _NAMES.get(value)


def result_text(value: int) -> str:
    """``304 (CUDA_ERROR_OPERATING_SYSTEM)``."""
    name = result_name(value)
    if name is None:
        return f"{value} (a value NVIDIA's cuda.h 12.x and 13.x do not define)"
    return f"{value} ({name})"


def takes_cuda_result(code: str) -> bool:
    """Whether the probe reports a CUDA result with this code."""
    return code in RESULT_CODES


def searched_facts(arch: str) -> str:
    """The observed facts of a ``LIBCUDA_SO_NOT_FOUND`` without driver_root
    (path-free: the directories go in the explanation beside them)."""
    return f"the probe searched its {arch} directories"


def _not_found_explanation(text: tuple[str, str], facts: str) -> tuple[str, str]:
    # Beside facts that say where the probe looked, the explanation's first
    # sentence and that architecture's directories; `explain` (no facts)
    # keeps every architecture's.
    first = text[0].split(". ", 1)[0].rstrip(".")
    for candidates in PROVIDER_SPEC.loader.linux_candidate_dirs:
        if facts == searched_facts(candidates.arch):
            searched = ", ".join(candidates.dirs)
            return f"{first}: {searched}.", text[1]
    return f"{first}.", text[1]


def explanation(
    code: str, cuda_result: int | None = None, facts: str | None = None
) -> tuple[str, str] | None:
    """(explanation, remedy) of a code, naming the CUDA result where one applies;
    for ``LIBCUDA_SO_NOT_FOUND`` with facts, only where this probe looked."""
    text = _codes.reason_text(code)
    if text is None:
        return None
    if facts and code == _codes.LIBCUDA_SO_NOT_FOUND:
        return _not_found_explanation(text, facts)
    if cuda_result is None or cuda_result == 0 or not takes_cuda_result(code):
        return text
    meaning = f"{text[0]} The driver returned {result_text(cuda_result)}."
    name = result_name(cuda_result)
    specific = CUDA_RESULT_REMEDIES.get(name) if name is not None else None
    if specific is None:
        return meaning, text[1]
    return f"{meaning} {specific[0]}", specific[1]


def explain_hint(code: str, cuda_result: int | None) -> str:
    """The command that prints the whole text of this refusal."""
    if cuda_result is not None and cuda_result != 0 and takes_cuda_result(code):
        return f"{EXPLAIN_COMMAND} {code} --cuda-result {cuda_result}"
    return f"{EXPLAIN_COMMAND} {code}"


class RefusalLine(NamedTuple):
    """The one WARNING line a refused preflight logs, kept as its parts.

    The provider logs it as its message argument (``logger.warning("%s",
    line)``); ``str()`` renders the path-free line.
    """

    reason_code: str
    facts: str | None
    cuda_result: int | None

    def __str__(self) -> str:
        code, facts, cuda_result = self.reason_code, self.facts, self.cuda_result
        observed = f" Observed: {facts}." if facts else ""
        text = explanation(code, cuda_result, facts)
        if text is None:
            # A code another probe reported: passed through, but not ours to explain.
            return (
                f"{_PROVIDER_ID} preflight refused: {code}: reported by the probe; "
                f"this provider has no explanation for it.{observed}"
            )
        return (
            f"{_PROVIDER_ID} preflight refused: {code}: {text[0]}{observed} "
            f"Run `{explain_hint(code, cuda_result)}`."
        )


def refusal_line(code: str, facts: str | None, cuda_result: int | None) -> RefusalLine:
    """The line a refused preflight logs (path-free), as its parts."""
    return RefusalLine(code, facts, cuda_result)
