"""Every refusal the package prints fits 100 columns and has one shape: the code and
its meaning, then ``observed:`` where facts decided it, then ``remedy:``; a longer
text continues on lines that start with two spaces (docs/interfaces.md, the command
line). One function formats them all (``_refusal_text.refusal_lines``): this walks
every reason code of the generated spec through it, with every CUDA result, loader
rule and searched architecture that changes its text.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cuda_support import SPEC, run_cli, unwrapped

from rextio_device_cuda._cuda_results import CUDA_RESULTS
from rextio_device_cuda._explain import OPTION_FLAGS
from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda._refusal_text import (
    RESULT_CODES,
    RefusalLine,
    Refused,
    loader_facts,
    refusal_lines,
    searched_facts,
    wrapped,
)

WIDTH = 100
FACTS = (
    "device 0 is sm_75 (NVIDIA GeForce RTX 2080 Ti with a long marketing name); "
    "sm_80 was selected"
)


def _variants(code: str) -> list[Refused]:
    variants = [Refused(code), Refused(code, FACTS)]
    if code in RESULT_CODES:
        variants += [Refused(code, FACTS, value) for value in CUDA_RESULTS.values()]
        variants.append(Refused(code, FACTS, 12345))
    if code == "LIBCUDA_SO_LOAD_FAILED":
        variants += [
            Refused(code, f"the loader's rule `{rule.name}` refused it", rule=rule.name)
            for rule in PROVIDER_SPEC.loader.rules
        ]
        reason = "libnvidia-ptxjitcompiler.so.1: cannot open shared object file: No such file"
        variants.append(Refused(code, loader_facts(reason), loader_refused=True))
    if code == "LIBCUDA_SO_NOT_FOUND":
        variants += [
            Refused(code, searched_facts(candidates.arch))
            for candidates in PROVIDER_SPEC.loader.linux_candidate_dirs
        ]
    return variants


CODES = sorted(PROVIDER_SPEC.reason_codes)


def _assert_shape(lines: list[str], refused: Refused, first: str) -> None:
    assert all(len(line) <= WIDTH for line in lines), lines
    assert lines[0].startswith(first), lines
    labels = [line.split(": ", 1)[0] for line in lines if not line.startswith("  ")]
    expected = ["observed", "remedy"] if refused.facts else ["remedy"]
    assert labels[1:] == expected, lines
    assert all(line.strip() for line in lines), lines


@pytest.mark.parametrize("code", CODES)
def test_every_refusal_fits_100_columns_in_one_shape(code: str) -> None:
    for refused in _variants(code):
        for flags in (None, OPTION_FLAGS):
            lines = refusal_lines(refused, flags=flags)
            _assert_shape(lines, refused, f"{code}: ")
        logged = str(RefusalLine(refused)).splitlines()
        _assert_shape(logged[:-1], refused, f"rextio-device-cuda preflight refused: {code}: ")
        assert logged[-1].startswith("more: python -m rextio_device_cuda explain "), logged
        # Nothing is lost to the wrapping: the facts read whole once joined.
        if refused.facts:
            assert f"\nobserved: {refused.facts}\n" in unwrapped("\n".join(lines)), lines


def test_every_reason_code_is_walked() -> None:
    # The spec's codes, framework lanes' included, are the ones walked above.
    assert set(CODES) == set(SPEC["reason_codes"])
    assert "TENSORFLOW_TFE_FEATURES_INCOMPATIBLE" in CODES


def test_a_refusing_rule_s_remedy_names_only_that_rule() -> None:
    rules = PROVIDER_SPEC.loader.rules
    for rule in rules:
        refused = Refused("LIBCUDA_SO_LOAD_FAILED", "facts", rule=rule.name)
        remedy = unwrapped("\n".join(refusal_lines(refused))).split("\nremedy: ")[1]
        assert f"`{rule.name}`" in remedy
        if rule.requires:
            assert rule.requires in remedy
        for other in rules:
            if other.name != rule.name and other.requires:
                assert other.requires not in remedy, (rule.name, remedy)


def test_explain_list_and_every_explain_fit_100_columns(tmp_path: Path) -> None:
    listed = run_cli("explain", "--list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)
    # Every code once, each at the start of its own line.
    starts = [line.split(": ", 1)[0] for line in lines if not line.startswith("  ")]
    assert starts == sorted(SPEC["reason_codes"])
    for code in ("LIBCUDA_SO_NOT_FOUND", "LIBCUDA_SO_LOAD_FAILED", "PROBE_PIN_LOADER_UNTRUSTED"):
        done = run_cli("explain", code, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert all(len(line) <= WIDTH for line in done.stdout.splitlines()), done.stdout
        assert done.stdout.startswith(f"{code}: ")


def test_a_quoted_command_is_never_split() -> None:
    command = "`python -m rextio_device_cuda build-probe`"
    for words in range(1, 60):
        lines = wrapped("error: ", f"{'word ' * words}{command} prints their paths.")
        assert all(len(line) <= WIDTH for line in lines), lines
        assert any(command in line for line in lines), lines
