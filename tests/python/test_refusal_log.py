"""The one WARNING line a refused preflight logs for the person running Rextio."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from cuda_support import (
    SPEC,
    ProbeFactory,
    profile_for,
    raw_requirement,
    ready_options,
    report,
    request_for,
    unavailable_report,
)

from rextio_device_cuda import CudaDeviceProvider

CAPABILITY = "cuda-linux-x86_64"


def _refused_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Each WARNING the provider logged, its wrapped lines joined again (a line's
    continuation starts with two spaces), after checking every line fits 100 columns."""
    messages = [
        record.getMessage()
        for record in caplog.records
        if record.name == "rextio_device_cuda" and record.levelno == logging.WARNING
    ]
    for message in messages:
        assert all(len(line) <= 100 for line in message.splitlines()), message
    return [message.replace("\n  ", " ") for message in messages]


def test_a_known_code_is_logged_with_its_explanation_and_the_explain_command(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    probe = probes.printing(report(sms=("sm_75",)))
    with caplog.at_level(logging.WARNING, logger="rextio_device_cuda"):
        result = CudaDeviceProvider().preflight(request_for(CAPABILITY, ready_options(probe)))
    assert result.reason_codes == ("CUDA_SM_MISMATCH",)
    explanation = SPEC["reason_codes"]["CUDA_SM_MISMATCH"][0]
    remedy = SPEC["reason_codes"]["CUDA_SM_MISMATCH"][1]
    assert _refused_lines(caplog) == [
        f"rextio-device-cuda preflight refused: CUDA_SM_MISMATCH: {explanation}\n"
        "observed: device 0 is sm_75 (Fixture GPU 0); sm_80 was selected\n"
        f"remedy: {remedy}\n"
        "more: python -m rextio_device_cuda explain CUDA_SM_MISMATCH"
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
        "this provider has no explanation for it.\nobserved: the probe loaded no driver"
    ]


def _logged(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture, probe_report: object, **options: str
) -> tuple[tuple[str, ...], list[str]]:
    probe = probes.printing(probe_report)
    with caplog.at_level(logging.WARNING, logger="rextio_device_cuda"):
        result = CudaDeviceProvider().preflight(
            request_for(CAPABILITY, ready_options(probe, **options))
        )
    assert str(probe) not in caplog.text
    return result.reason_codes, _refused_lines(caplog)


@pytest.mark.parametrize(
    ("name", "value", "remedy_words"),
    [
        ("CUDA_ERROR_OPERATING_SYSTEM", 304, "seccomp"),
        ("CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", 803, "forward-compatibility"),
        ("CUDA_ERROR_UNKNOWN", 999, "nvidia-uvm"),
    ],
)
def test_a_driver_failure_names_the_cuda_result(
    probes: ProbeFactory,
    caplog: pytest.LogCaptureFixture,
    name: str,
    value: int,
    remedy_words: str,
) -> None:
    failed = {
        **unavailable_report("CU_INIT_FAILED"),
        "driver_loaded": True,
        "driver_version": 12040,
        "cuda_result": value,
    }
    codes, lines = _logged(probes, caplog, failed)
    assert codes == ("CU_INIT_FAILED",)
    explanation = SPEC["reason_codes"]["CU_INIT_FAILED"][0]
    [line] = lines
    assert line.startswith(
        f"rextio-device-cuda preflight refused: CU_INIT_FAILED: {explanation} "
        f"The driver returned {value} ({name})."
    ), line
    assert remedy_words in line.split("\nremedy: ")[1]
    assert "\nobserved: the probe loaded driver 12.4 (12040)\nremedy: " in line, line
    assert line.endswith(
        f"\nmore: python -m rextio_device_cuda explain CU_INIT_FAILED --cuda-result {value}"
    ), line


def test_a_result_cuda_h_does_not_define_is_said_so(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    failed = {**unavailable_report("CU_DEVICE_COUNT_FAILED"), "cuda_result": 35}
    codes, [line] = _logged(probes, caplog, failed)
    assert codes == ("CU_DEVICE_COUNT_FAILED",)
    assert "The driver returned 35 (a value NVIDIA's cuda.h 12.x and 13.x do not define)." in line


def test_no_devices_names_cuinit_s_answer_and_not_cuda_visible_devices(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    none = {
        **unavailable_report("NO_CUDA_DEVICES"),
        "driver_loaded": True,
        "driver_version": 12080,
        "device_count": 0,
        "cuda_result": 100,
    }
    codes, [line] = _logged(probes, caplog, none)
    assert codes == ("NO_CUDA_DEVICES",)
    assert "The driver returned 100 (CUDA_ERROR_NO_DEVICE)." in line
    counted = "the probe loaded driver 12.8 (12080); the driver counted 0 devices"
    assert f"\nobserved: {counted}\n" in line
    assert "CUDA_VISIBLE_DEVICES" not in " ".join(SPEC["reason_codes"]["NO_CUDA_DEVICES"])


@pytest.mark.parametrize(
    ("sm", "driver_version", "code", "observed"),
    [
        (
            "sm_120",
            12040,
            "CUDA_ARCHITECTURE_DRIVER_TOO_OLD",
            "driver 12.4 is older than 12.8, the first CUDA release that knows sm_120",
        ),
        (
            "sm_90",
            12080,
            "CUDA_SM_MISMATCH",
            "device 0 is sm_80 (NVIDIA A100-SXM4-80GB); sm_90 was selected",
        ),
        (
            "sm_80",
            11080,
            "DRIVER_VERSION_TOO_OLD",
            "driver 11.8 (11080) is older than the floor 12.0 (12000)",
        ),
    ],
)
def test_a_refusal_line_states_the_facts_that_decided_it(
    probes: ProbeFactory,
    caplog: pytest.LogCaptureFixture,
    sm: str,
    driver_version: int,
    code: str,
    observed: str,
) -> None:
    device = report(driver_version=driver_version)
    device["devices"][0]["name"] = "NVIDIA A100-SXM4-80GB"
    requirement = raw_requirement(sm=sm)
    probe = probes.printing(device)
    with caplog.at_level(logging.WARNING, logger="rextio_device_cuda"):
        result = CudaDeviceProvider().preflight(
            request_for(
                CAPABILITY,
                ready_options(probe, sm=sm),
                profile=profile_for(CAPABILITY, requirements=(requirement,)),
            )
        )
    assert result.reason_codes == (code,)
    assert result.observations == ()
    explanation, remedy = SPEC["reason_codes"][code]
    assert _refused_lines(caplog) == [
        f"rextio-device-cuda preflight refused: {code}: {explanation}\n"
        f"observed: {observed}\nremedy: {remedy}\n"
        f"more: python -m rextio_device_cuda explain {code}"
    ]


def test_a_device_name_that_holds_a_slash_is_left_out(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    device = report(sms=("sm_75",))
    device["devices"][0]["name"] = "GPU at etc/passwd"
    codes, [line] = _logged(probes, caplog, device)
    assert codes == ("CUDA_SM_MISMATCH",)
    assert "\nobserved: device 0 is sm_75; sm_80 was selected\n" in line
    assert "passwd" not in line


def test_a_ready_preflight_logs_nothing(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    probe = probes.printing(report())
    with caplog.at_level(logging.DEBUG, logger="rextio_device_cuda"):
        result = CudaDeviceProvider().preflight(request_for(CAPABILITY, ready_options(probe)))
    assert result.status.value == "ready"
    assert _refused_lines(caplog) == []


# -- refusal lines that fit a terminal (docs/interfaces.md, the command line) --


def test_an_unknown_option_is_named_by_its_key_never_its_value(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # A typo of device_ordinal; its value must not appear.
    codes, lines = _logged(
        probes, caplog, report(), device_ordnal="secret-value-7f3a"
    )
    assert codes == ("PROVIDER_OPTION_UNKNOWN",)
    [line] = lines
    assert "\nobserved: device_ordnal is not an option of cuda-linux-x86_64\n" in line, line
    assert "secret-value-7f3a" not in caplog.text


def test_toolkit_root_on_the_libtorch_lane_is_named_as_the_unknown_key(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    probe = probes.printing(report())
    capability = "cuda-libtorch-linux-x86_64"
    options = ready_options(probe, toolkit_root="/opt/cuda-secret")
    with caplog.at_level(logging.WARNING, logger="rextio_device_cuda"):
        result = CudaDeviceProvider().preflight(request_for(capability, options))
    assert result.reason_codes == ("PROVIDER_OPTION_UNKNOWN",)
    [line] = _refused_lines(caplog)
    assert f"\nobserved: toolkit_root is not an option of {capability}\n" in line, line
    assert "/opt/cuda-secret" not in caplog.text


def test_load_failed_names_the_refusing_rule_from_the_probe_record(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    refused = {**unavailable_report("LIBCUDA_SO_LOAD_FAILED"), "refusing_rule": "mode"}
    codes, lines = _logged(probes, caplog, refused)
    assert codes == ("LIBCUDA_SO_LOAD_FAILED",)
    [line] = lines
    assert (
        "\nobserved: the loader's rule `mode` refused the libcuda.so.1 the probe found\n" in line
    ), line
    # The remedy names what that rule requires, and no other rule.
    [mode] = [rule for rule in SPEC["loader"]["rules"] if rule["name"] == "mode"]
    remedy = line.split("\nremedy: ")[1].split("\nmore: ")[0]
    assert mode["requires"] in remedy, remedy
    for other in SPEC["loader"]["rules"]:
        if other["name"] != "mode":
            assert f"`{other['name']}`" not in remedy
            assert other["name"] + " (" not in remedy


def test_a_probe_record_without_a_rule_still_parses_as_0_1_0s_did(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    codes, lines = _logged(probes, caplog, unavailable_report("LIBCUDA_SO_LOAD_FAILED"))
    assert codes == ("LIBCUDA_SO_LOAD_FAILED",)
    assert "\nobserved: the probe loaded no driver\n" in lines[0], lines


@pytest.mark.parametrize(
    ("rule", "code"),
    [
        ("/usr/lib/libcuda.so.1", "PROBE_SCHEMA_INVALID"),
        ("Mode", "PROBE_SCHEMA_INVALID"),
        (7, "PROBE_SCHEMA_INVALID"),
        (None, "PROBE_SCHEMA_INVALID"),
    ],
)
def test_a_refusing_rule_that_is_not_a_rule_name_breaks_the_schema(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture, rule: object, code: str
) -> None:
    refused = {**unavailable_report("LIBCUDA_SO_LOAD_FAILED"), "refusing_rule": rule}
    codes, lines = _logged(probes, caplog, refused)
    assert codes == (code,)
    assert "/usr/lib/libcuda.so.1" not in lines[0]


def test_a_complete_report_with_a_refusing_rule_breaks_the_schema(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    codes, _ = _logged(probes, caplog, {**report(), "refusing_rule": "mode"})
    assert codes == ("PROBE_SCHEMA_INVALID",)


@pytest.mark.parametrize(
    ("make", "facts"),
    [
        (None, "the configured driver_root does not exist"),
        ("file", "the configured driver_root is not a directory"),
        ("dir", "the configured driver_root holds no libcuda.so.1"),
    ],
)
def test_a_driver_root_without_a_driver_says_which(
    probes: ProbeFactory,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    make: str | None,
    facts: str,
) -> None:
    root = tmp_path / "driver-root"
    if make == "file":
        root.write_text("", encoding="utf-8")
    elif make == "dir":
        root.mkdir()
    codes, lines = _logged(
        probes, caplog, unavailable_report("LIBCUDA_SO_NOT_FOUND"), driver_root=str(root)
    )
    assert codes == ("LIBCUDA_SO_NOT_FOUND",)
    assert f"\nobserved: {facts}\n" in lines[0], lines
    assert str(tmp_path) not in lines[0]


def test_no_driver_found_names_only_this_architectures_directories(
    probes: ProbeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    codes, lines = _logged(probes, caplog, unavailable_report("LIBCUDA_SO_NOT_FOUND"))
    assert codes == ("LIBCUDA_SO_NOT_FOUND",)
    [line] = lines
    searched = {entry["arch"]: entry["dirs"] for entry in SPEC["loader"]["linux_candidate_dirs"]}
    x86_64 = " ".join(searched["x86_64"])
    remedy = SPEC["reason_codes"]["LIBCUDA_SO_NOT_FOUND"][1]
    assert line == (
        "rextio-device-cuda preflight refused: LIBCUDA_SO_NOT_FOUND: "
        f"No libcuda.so.1 exists where the probe looked: {x86_64}\n"
        "observed: the probe searched its x86_64 directories\n"
        f"remedy: {remedy}\n"
        "more: python -m rextio_device_cuda explain LIBCUDA_SO_NOT_FOUND"
    )
    # 0.1.0's line listed every architecture's directories (about 900 characters).
    assert "aarch64" not in line
