"""The one WARNING line a refused preflight logs for the person running Rextio."""

from __future__ import annotations

import logging

import pytest
from cuda_support import SPEC, ProbeFactory, ready_options, report, request_for, unavailable_report

from rextio_device_cuda import CudaDeviceProvider

CAPABILITY = "cuda-linux-x86_64"


def _refused_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "rextio_device_cuda" and record.levelno == logging.WARNING
    ]


def test_a_known_code_is_logged_with_its_explanation_and_the_explain_command(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    probe = probes.printing(report(sms=("sm_75",)))
    with caplog.at_level(logging.WARNING, logger="rextio_device_cuda"):
        result = CudaDeviceProvider().preflight(request_for(CAPABILITY, ready_options(probe)))
    assert result.reason_codes == ("CUDA_SM_MISMATCH",)
    explanation = SPEC["reason_codes"]["CUDA_SM_MISMATCH"][0]
    assert _refused_lines(caplog) == [
        f"rextio-device-cuda preflight refused: CUDA_SM_MISMATCH: {explanation} "
        "Run `python -m rextio_device_cuda explain CUDA_SM_MISMATCH`."
    ]
    assert str(probe) not in caplog.text


def test_a_code_another_probe_reported_is_named_without_a_false_explain_hint(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    probe = probes.printing(unavailable_report("SOME_OTHER_PROBE_CODE"))
    with caplog.at_level(logging.WARNING, logger="rextio_device_cuda"):
        result = CudaDeviceProvider().preflight(request_for(CAPABILITY, ready_options(probe)))
    assert result.reason_codes == ("SOME_OTHER_PROBE_CODE",)
    assert _refused_lines(caplog) == [
        "rextio-device-cuda preflight refused: SOME_OTHER_PROBE_CODE: reported by the probe; "
        "this provider has no explanation for it."
    ]


def test_a_ready_preflight_logs_nothing(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    probe = probes.printing(report())
    with caplog.at_level(logging.DEBUG, logger="rextio_device_cuda"):
        result = CudaDeviceProvider().preflight(request_for(CAPABILITY, ready_options(probe)))
    assert result.status.value == "ready"
    assert _refused_lines(caplog) == []
