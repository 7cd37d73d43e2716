"""The CUDA result names refusals quote: complete against NVIDIA's cuda.h 12.x and 13.x.

The ABI check compiles each name's value against both headers; this test reads
the headers' ``CUresult`` enum and proves the generated list holds exactly its
names, nothing more, and that ``explain --cuda-result`` prints the specific text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cuda_support import SPEC, run_cli, unwrapped
from nvidia_wheels import HEADERS_CACHE, REPOSITORY, Wheel, read_member

from rextio_device_cuda._cuda_results import CUDA_RESULT_REMEDIES, CUDA_RESULTS
from rextio_device_cuda.cli import main

_SYMBOLS = json.loads((REPOSITORY / "templates" / "driver-symbols.json").read_text("utf-8"))
_RESULTS = json.loads((REPOSITORY / "templates" / "cuda-results.json").read_text("utf-8"))
_ENUM = re.compile(r"typedef enum cudaError_enum \{(.*?)\} CUresult;", re.DOTALL)
_ENTRY = re.compile(r"(CUDA_[A-Z0-9_]+)\s*=\s*([0-9]+)")


def _header_results(name: str) -> dict[str, int]:
    header_set = _SYMBOLS["header_sets"][name]
    wheel = Wheel(header_set["package"], header_set["version"], header_set["wheel_sha256"])
    text = read_member(wheel, HEADERS_CACHE, f"{header_set['include_dir']}/cuda.h").decode()
    match = _ENUM.search(text)
    assert match is not None, "cuda.h has no CUresult enum"
    body = re.sub(r"/\*.*?\*/", "", match.group(1), flags=re.DOTALL)
    entries = [entry.strip() for entry in body.split(",") if entry.strip()]
    found = {}
    for entry in entries:
        parsed = _ENTRY.fullmatch(entry)
        assert parsed is not None, f"an enumerator this test cannot read: {entry!r}"
        found[parsed[1]] = int(parsed[2])
    return found


@pytest.mark.parametrize("header_set", sorted(_SYMBOLS["header_sets"]))
def test_the_names_are_exactly_the_header_s(header_set: str) -> None:
    undeclared = set(_RESULTS["undeclared_in"].get(header_set, ()))
    expected = {name: value for name, value in CUDA_RESULTS.items() if name not in undeclared}
    header = _header_results(header_set)
    assert len(header) > 90
    assert header == expected


def test_nothing_is_listed_that_no_header_defines() -> None:
    every: dict[str, int] = {}
    for header_set in _SYMBOLS["header_sets"]:
        every.update(_header_results(header_set))
    assert every == CUDA_RESULTS


def test_the_contract_s_results_have_their_remedies() -> None:
    # The results whose refusals carry a remedy of their own (35 is the runtime API's
    # cudaErrorInsufficientDriver: cuda.h has none).
    for value in (3, 100, 304, 803, 804, 999):
        names = [name for name, listed in CUDA_RESULTS.items() if listed == value]
        assert len(names) == 1
        assert names[0] in CUDA_RESULT_REMEDIES
    assert 35 not in CUDA_RESULTS.values()


def test_explain_names_every_result(capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in CUDA_RESULTS.items():
        if value == 0:
            continue
        assert main(["explain", "CU_INIT_FAILED", "--cuda-result", str(value)]) == 0
        printed = unwrapped(capsys.readouterr().out)
        assert f"The driver returned {value} ({name})." in printed
        remedy = CUDA_RESULT_REMEDIES.get(name, (None, SPEC["reason_codes"]["CU_INIT_FAILED"][1]))
        assert f"remedy: {remedy[1]}" in printed


@pytest.mark.parametrize(
    ("value", "name", "words"),
    [
        (304, "CUDA_ERROR_OPERATING_SYSTEM", "PID namespace"),
        (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "kernel module"),
        (804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "forward-compatibility"),
        (999, "CUDA_ERROR_UNKNOWN", "/dev/nvidia-uvm"),
        (3, "CUDA_ERROR_NOT_INITIALIZED", "reboot"),
    ],
)
def test_explain_cuda_result_prints_the_specific_remedy(
    value: int, name: str, words: str, tmp_path: Path
) -> None:
    done = run_cli("explain", "CU_INIT_FAILED", "--cuda-result", str(value), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "CU_INIT_FAILED: cuInit failed; the driver could not initialise. "
        f"The driver returned {value} ({name})."
        in unwrapped(done.stdout)
    )
    assert words in unwrapped(done.stdout).split("remedy: ")[1]


def test_explain_no_devices_with_100(tmp_path: Path) -> None:
    done = run_cli("explain", "NO_CUDA_DEVICES", "--cuda-result", "100", cwd=tmp_path)
    assert done.returncode == 0
    assert "(CUDA_ERROR_NO_DEVICE)" in done.stdout
    assert "CUDA_VISIBLE_DEVICES" not in done.stdout


@pytest.mark.parametrize(
    "arguments",
    [
        ["explain", "CU_INIT_FAILED", "--cuda-result", "abc"],
        ["explain", "CU_INIT_FAILED", "--cuda-result", "3_04"],
        ["explain", "CU_INIT_FAILED", "--cuda-result", " 304"],
        ["explain", "CU_INIT_FAILED", "--cuda-result", "4294967296"],
        ["explain", "DEVICE_ORDINAL_INVALID", "--cuda-result", "304"],
    ],
)
def test_explain_refuses_a_result_it_cannot_use(arguments: list[str], tmp_path: Path) -> None:
    done = run_cli(*arguments, cwd=tmp_path)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr

