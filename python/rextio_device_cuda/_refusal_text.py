"""What a person reads about a refusal: its explanation, remedy and observed facts.

Imported only when a refusal is logged or explained (the CUDA result names,
every CUresult of NVIDIA's cuda.h, are of no use to a ready preflight).
Records never carry any of this: they hold the reason code alone.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from typing import Final, NamedTuple, Protocol

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


def _searched_dirs(facts: str | None) -> tuple[str, ...] | None:
    """The directories the facts of a ``LIBCUDA_SO_NOT_FOUND`` say were searched."""
    for candidates in PROVIDER_SPEC.loader.linux_candidate_dirs:
        if facts == searched_facts(candidates.arch):
            return tuple(candidates.dirs)
    return None


def _first_sentence(text: str) -> str:
    return text.split(". ", 1)[0].rstrip(".") + "."


def explanation(
    code: str, cuda_result: int | None = None, facts: str | None = None
) -> tuple[str, str] | None:
    """(explanation, remedy) of a code, naming the CUDA result where one applies;
    for ``LIBCUDA_SO_NOT_FOUND`` with facts, only where this probe looked."""
    text = _codes.reason_text(code)
    if text is None:
        return None
    if facts and code == _codes.LIBCUDA_SO_NOT_FOUND:
        dirs = _searched_dirs(facts)
        first = _first_sentence(text[0])
        if dirs is None:
            return first, text[1]
        return f"{first[:-1]}: {', '.join(dirs)}.", text[1]
    if cuda_result is None or cuda_result == 0 or not takes_cuda_result(code):
        return text
    meaning = f"{text[0]} The driver returned {result_text(cuda_result)}."
    name = result_name(cuda_result)
    specific = CUDA_RESULT_REMEDIES.get(name) if name is not None else None
    if specific is None:
        return meaning, text[1]
    return f"{meaning} {specific[0]}", specific[1]


def rule_requires(rule: str) -> str | None:
    """What the loader's rule ``rule`` requires, as the spec says it (None: unknown or unsaid)."""
    for spec in PROVIDER_SPEC.loader.rules:
        if spec.name == rule:
            return spec.requires
    return None


def rule_remedy(rule: str) -> str:
    """The remedy of a ``LIBCUDA_SO_LOAD_FAILED`` that the loader's rule ``rule`` refused:
    that rule's requirement only."""
    requires = rule_requires(rule)
    what = f": {requires}" if requires else ""
    return (
        f"Make the libcuda.so.1 the probe found pass the loader's rule `{rule}`{what}. "
        "Run the probe by hand to see which file it refused."
    )


# After every rule passed, the dynamic loader refused the image itself.
LOADER_REMEDY: Final = (
    "The image passed the loader's review, but the dynamic loader could not load it: install "
    "the NVIDIA driver's libcuda.so.1 built for this architecture, with the libraries it "
    "needs beside it."
)


def loader_facts(reason: str) -> str:
    """The observed facts of a ``LIBCUDA_SO_LOAD_FAILED`` the dynamic loader refused."""
    return f"the dynamic loader could not load the reviewed libcuda.so.1: {reason}"


def explain_hint(code: str, cuda_result: int | None) -> str:
    """The command that prints the whole text of this refusal."""
    if cuda_result is not None and cuda_result != 0 and takes_cuda_result(code):
        return f"{EXPLAIN_COMMAND} {code} --cuda-result {cuda_result}"
    return f"{EXPLAIN_COMMAND} {code}"


WIDTH: Final = 100
_CONTINUED: Final = "  "


# A command quoted in backticks: kept on one line, so it can be copied whole.
_QUOTED: Final = re.compile(r"`[^`\n]*`")
_KEPT_SPACE: Final = "\0"


def wrapped(label: str, text: str) -> list[str]:
    """``label`` and ``text`` in lines of at most ``WIDTH`` columns, continued lines
    indented; a backticked command is not split (unless it alone is too long)."""
    kept = _QUOTED.sub(lambda quoted: quoted[0].replace(" ", _KEPT_SPACE), label + text)
    lines = textwrap.wrap(
        kept,
        width=WIDTH,
        subsequent_indent=_CONTINUED,
        break_on_hyphens=False,
    )
    return [line.replace(_KEPT_SPACE, " ") for line in lines] or [label.rstrip()]


def for_command(remedy: str, flags: Mapping[str, str]) -> str:
    """``remedy`` with each device option key it names replaced by its command-line flag."""
    for key, flag in flags.items():
        remedy = _key_pattern(key).sub(flag, remedy)
    return remedy


def _key_pattern(key: str) -> re.Pattern[str]:
    # The key as a word of its own, with or without its table's name (`re` caches it).
    return re.compile(rf"(?<![\w.-])(?:device_options\.)?{re.escape(key)}(?![\w-])")


class RefusalFacts(Protocol):
    """What decided one refusal, for the lines a person reads (never for a record).

    ``facts``: what was observed (path-free); ``cuda_result``: the driver's
    answer; ``rule``: the loader rule that refused the driver image;
    ``loader_refused``: the dynamic loader refused an image that passed review.
    """

    @property
    def reason_code(self) -> str: ...
    @property
    def facts(self) -> str | None: ...
    @property
    def cuda_result(self) -> int | None: ...
    @property
    def rule(self) -> str | None: ...
    @property
    def loader_refused(self) -> bool: ...


class Refused(NamedTuple):
    """A refusal known by its code and, where known, its facts (``RefusalFacts``)."""

    reason_code: str
    facts: str | None = None
    cuda_result: int | None = None
    rule: str | None = None
    loader_refused: bool = False


def remedy_of(refused: RefusalFacts, default: str) -> str:
    """The remedy of ``refused``: only what its refusing rule requires, where one did."""
    if refused.reason_code == _codes.LIBCUDA_SO_LOAD_FAILED:
        if refused.rule is not None:
            return rule_remedy(refused.rule)
        if refused.loader_refused:
            return LOADER_REMEDY
    return default


def refusal_lines(
    refused: RefusalFacts,
    *,
    flags: Mapping[str, str] | None = None,
    heading: str = "",
    unknown: str = f"not a reason code of {_PROVIDER_ID}",
) -> list[str]:
    """A refusal as every surface prints it, each line at most ``WIDTH`` columns.

    ``CODE: meaning`` (wrapped; a searched directory list one per line), then
    ``observed: facts`` where facts decided it, then ``remedy: ...``.
    ``flags``: the printing command's option for each device option key, so
    the remedy names what the reader types; ``heading``: what the first line
    says before the code; ``unknown``: the meaning of a code that is not ours.
    """
    code, facts = refused.reason_code, refused.facts
    text = explanation(code, refused.cuda_result, facts)
    dirs = _searched_dirs(facts) if code == _codes.LIBCUDA_SO_NOT_FOUND else None
    if text is None:
        lines = wrapped(f"{heading}{code}: ", unknown)
    elif dirs is not None:
        lines = wrapped(f"{heading}{code}: ", text[0].split(": ", 1)[0] + ":")
        lines += [_CONTINUED + directory for directory in dirs]
    else:
        lines = wrapped(f"{heading}{code}: ", text[0])
    if facts:
        lines += wrapped("observed: ", facts)
    if text is not None:
        remedy = remedy_of(refused, text[1])
        lines += wrapped("remedy: ", remedy if flags is None else for_command(remedy, flags))
    return lines


class RefusalLine(NamedTuple):
    """The WARNING a refused preflight logs, kept as its refusal.

    The provider logs it as its message argument (``logger.warning("%s",
    line)``); ``str()`` renders the path-free lines, each at most ``WIDTH``.
    """

    refusal: RefusalFacts

    def __str__(self) -> str:
        refusal = self.refusal
        lines = refusal_lines(
            refusal,
            heading=f"{_PROVIDER_ID} preflight refused: ",
            unknown="reported by the probe; this provider has no explanation for it.",
        )
        if _codes.reason_text(refusal.reason_code) is not None:
            lines += wrapped("more: ", explain_hint(refusal.reason_code, refusal.cuda_result))
        return "\n".join(lines)
