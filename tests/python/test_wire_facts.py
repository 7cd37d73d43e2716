"""Facts the spec holds once keep their 0.1.0 wire values: the probe's and the
smoke's flags, the evidence's keys, the loader's rule names (the smoke
record's keys: tests/e2e/test_smoke_simulated.py). Each test asserts the
literal a 0.1.0 client reads."""

from __future__ import annotations

import pytest

from rextio_device_cuda import _loader_rules, _validate
from rextio_device_cuda._provider_spec import PROVIDER_SPEC

_EVIDENCE_KEYS = [
    "evidence",
    "schema_version",
    "support_claim",
    "kernel_executed",
    "certification_ready",
    "provider_version",
    "capability",
    "selected_device",
    "selected_sm",
    "toolkit_root_configured",
    "probe_sha256",
    "smoke_sha256",
    "validated",
    "round_trip",
    "reason_code",
    "probe_report",
    "preflight",
    "smoke",
]


def test_the_flags_are_the_probes_and_the_smokes() -> None:
    arguments = PROVIDER_SPEC.probe_arguments
    assert (arguments.driver_root, arguments.device) == ("--driver-root", "--device")


def test_the_evidence_is_named_and_keyed_as_on_the_wire() -> None:
    evidence = PROVIDER_SPEC.validation_evidence
    assert (evidence.name, evidence.schema_version) == ("rextio-device-cuda-nvidia-validation", "1")
    assert list(evidence.keys) == _EVIDENCE_KEYS
    assert (
        evidence.name,
        evidence.schema_version,
    ) == (_validate.EVIDENCE_NAME, _validate.EVIDENCE_SCHEMA_VERSION)


def test_the_evidence_is_built_in_the_specs_order() -> None:
    values = {key: index for index, key in enumerate(reversed(_EVIDENCE_KEYS))}
    built = _validate._evidence(**values)
    assert list(built) == _EVIDENCE_KEYS
    assert built == values


@pytest.mark.parametrize("change", ["missing", "extra"])
def test_evidence_with_a_key_the_spec_does_not_list_or_without_one_is_refused(
    change: str,
) -> None:
    values: dict[str, object] = dict.fromkeys(_EVIDENCE_KEYS)
    if change == "missing":
        del values["round_trip"]
    else:
        values["kernel_ran"] = False
    with pytest.raises(ValueError, match="the evidence's keys differ from the spec's"):
        _validate._evidence(**values)


def test_the_loader_rule_constants_are_the_specs_rule_names() -> None:
    names = [rule.name for rule in PROVIDER_SPEC.loader.rules]
    assert names == [
        "owner",
        "mode",
        "writable-directory",
        "links",
        "location",
        "regular-file",
        "resolution",
    ]
    constants = {
        name: value for name, value in vars(_loader_rules).items() if name.isupper()
    }
    assert constants == {name.upper().replace("-", "_"): name for name in names}


def test_a_key_read_back_that_the_spec_does_not_list_is_refused() -> None:
    _validate._check_keys(PROVIDER_SPEC.smoke.fields, "status", "round_trip")
    with pytest.raises(RuntimeError, match=r"the spec's record lacks \['kernel_ran'\]"):
        _validate._check_keys(PROVIDER_SPEC.smoke.fields, "status", "kernel_ran")
