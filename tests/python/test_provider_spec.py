"""The generated spec records hold exactly templates/provider-spec.json, frozen."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Mapping

import pytest
from cuda_support import LANES, SPEC

from rextio_device_cuda._provider_spec import (
    CAPABILITIES,
    PROVIDER_SPEC,
    FrameworkLaneSpec,
    RawDriverLaneSpec,
)


def _same(record: object, source: object, path: str) -> None:
    """Walks the JSON source and the generated value together."""
    if type(record).__module__ == PROVIDER_SPEC.__module__:
        assert isinstance(source, dict), path
        names = set(source)
        for field in vars(type(record))["__slots__"]:
            value = getattr(record, field)
            if field not in names:
                # An optional key the JSON leaves out: absent means none.
                assert value in (None, ()), f"{path}.{field}"
        for key, item in source.items():
            _same(getattr(record, key), item, f"{path}.{key}")
    elif isinstance(record, Mapping):
        assert isinstance(source, dict), path
        assert sorted(record) == sorted(source), path
        for key, item in source.items():
            _same(record[key], item, f"{path}.{key}")
    elif isinstance(record, frozenset):
        assert isinstance(source, list), path
        assert record == frozenset(source), path
        assert len(source) == len(record), path
    elif isinstance(record, tuple):
        assert isinstance(source, list), path
        assert len(record) == len(source), path
        for index, (value, item) in enumerate(zip(record, source, strict=True)):
            _same(value, item, f"{path}[{index}]")
    else:
        assert type(record) is type(source) or isinstance(record, float), path
        assert record == source, path


def test_generated_records_hold_exactly_the_spec() -> None:
    # The version is written once, in `distribution`; the manifest's follows it.
    version = SPEC["distribution"]["version"]
    source = copy.deepcopy(SPEC)
    source["manifest"]["display_name"] += f" {version}"
    source["manifest"]["provider_version"] = version
    # A lane is written under its kind; the record's class is that kind.
    source["lanes"] = copy.deepcopy(LANES)
    kinds = {"raw_driver": RawDriverLaneSpec, "framework_reuse": FrameworkLaneSpec}
    for name, written in SPEC["lanes"].items():
        (kind,) = written
        assert type(PROVIDER_SPEC.lanes[name]) is kinds[kind], name
    _same(PROVIDER_SPEC, source, "spec")
    assert PROVIDER_SPEC.manifest.provider_version == version
    assert list(CAPABILITIES) == [item["id"] for item in SPEC["capabilities"]]


def test_records_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PROVIDER_SPEC.policy.device_ordinal_max = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        del PROVIDER_SPEC.policy.device_ordinal_max


def test_records_compare_and_hash_by_value() -> None:
    pin = PROVIDER_SPEC.manifest.runtime_requirements[0]
    same = type(pin)(name=pin.name, version=pin.version, features=pin.features)
    assert same is not pin
    assert same == pin
    assert hash(same) == hash(pin)
    assert type(pin)(name=pin.name, version="0", features=pin.features) != pin
    assert repr(same) == (
        f"RuntimePin(name={pin.name!r}, version={pin.version!r}, features={pin.features!r})"
    )
    with pytest.raises(TypeError):
        type(pin)(name=pin.name, version=pin.version)  # type: ignore[call-arg]


def test_a_record_copies_and_pickles_to_an_equal_frozen_record() -> None:
    for record in (PROVIDER_SPEC.manifest.runtime_requirements[0], PROVIDER_SPEC):
        for twin in (
            copy.copy(record),
            copy.deepcopy(record),
            pickle.loads(pickle.dumps(record)),  # noqa: S301 (our own bytes)
        ):
            assert twin == record
            assert type(twin) is type(record)
    pin = PROVIDER_SPEC.manifest.runtime_requirements[0]
    assert hash(copy.copy(pin)) == hash(pickle.loads(pickle.dumps(pin))) == hash(pin)  # noqa: S301
    twin = pickle.loads(pickle.dumps(PROVIDER_SPEC.policy))  # noqa: S301 (our own bytes)
    with pytest.raises(dataclasses.FrozenInstanceError):
        twin.device_ordinal_max = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        del twin.device_ordinal_max
    assert twin.device_ordinal_max == PROVIDER_SPEC.policy.device_ordinal_max


def test_a_record_refuses_a_name_it_does_not_have() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PROVIDER_SPEC.policy.not_a_field = 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        del PROVIDER_SPEC.policy.not_a_field  # type: ignore[attr-defined]
