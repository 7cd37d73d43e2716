"""Typed view of the generated provider spec: every fact the package uses.

The spec (``templates/provider-spec.json``) reaches Python only through
``_generated.PROVIDER_SPEC``; this module turns it into small frozen records
and checks, at import, that every reason code the code names exists there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from rextio_device_cuda._generated import (
    PROVIDER_SPEC,
    RUNTIME_SOURCE_ARCHIVE,
    RUNTIME_SOURCE_SHA256,
)

_SPEC: Final[dict[str, Any]] = PROVIDER_SPEC


@dataclass(frozen=True)
class RuntimePin:
    """One frozen runtime requirement a framework lane demands."""

    name: str
    version: str
    features: tuple[str, ...]


@dataclass(frozen=True)
class ResourceContractSpec:
    """One resource contract of a lane's build contribution."""

    resource_kind: str
    owner: str
    access: str
    may_allocate: bool
    may_replace: bool
    may_synchronize: bool


@dataclass(frozen=True)
class ContributionSpec:
    """The declarative build inputs of one lane."""

    cargo_features: tuple[str, ...]
    native_libraries: tuple[str, ...]
    package_references: tuple[str, ...]
    generated_helper_ids: tuple[str, ...]
    runtime_check_ids: tuple[str, ...]
    resource_contracts: tuple[ResourceContractSpec, ...]


@dataclass(frozen=True)
class RequirementSpec:
    """The one device requirement a framework lane declares and accepts."""

    logical_device: str
    backend: str
    runtime: str
    features: frozenset[str]
    layouts: frozenset[str]
    memory_spaces: frozenset[str]
    architectures: tuple[str, ...]
    reuse_domain_runtime: bool


@dataclass(frozen=True)
class RawRequirementPolicy:
    """What a raw-driver lane accepts in a CUDA device requirement."""

    allowed_runtimes: frozenset[str | None]
    allowed_features: frozenset[str]
    allowed_memory_spaces: frozenset[str]
    allowed_layouts: frozenset[str]


@dataclass(frozen=True)
class LaneSpec:
    """One lane: raw-driver, or a framework runtime-reuse lane."""

    name: str
    option_allowlist: frozenset[str]
    toolkit_inspection: bool
    observations: tuple[tuple[str, str], ...]
    contribution: ContributionSpec
    reason_prefix: str | None
    raw_policy: RawRequirementPolicy | None
    requirement: RequirementSpec | None
    runtime_pins: tuple[RuntimePin, ...]
    required_python_fallback_backend: str | None

    @property
    def is_framework(self) -> bool:
        """Whether this lane reuses a framework runtime (no raw driver)."""
        return self.requirement is not None

    def code(self, suffix: str) -> str:
        """The lane-prefixed reason code ``<PREFIX><suffix>``, which must exist."""
        if self.reason_prefix is None:
            raise KeyError(f"lane {self.name} has no reason prefix")
        return known_code(self.reason_prefix + suffix)


@dataclass(frozen=True)
class CapabilitySpec:
    """One declared capability and the lane it belongs to."""

    id: str
    lane: LaneSpec
    target_triple: str
    artifact_kinds: tuple[str, ...]
    minimum_runtime_version: str
    minimum_driver_version: str


@dataclass(frozen=True)
class ProbeTargetSpec:
    """The (os, arch, environment) a probe reports for a target triple."""

    os: str
    arch: str
    environment: str


def _strings(values: Any) -> tuple[str, ...]:
    return tuple(str(value) for value in values)


def _contribution(raw: dict[str, Any]) -> ContributionSpec:
    return ContributionSpec(
        cargo_features=_strings(raw["cargo_features"]),
        native_libraries=_strings(raw["native_libraries"]),
        package_references=_strings(raw["package_references"]),
        generated_helper_ids=_strings(raw["generated_helper_ids"]),
        runtime_check_ids=_strings(raw["runtime_check_ids"]),
        # A key the record lacks (or lacks a field for) fails at import.
        resource_contracts=tuple(
            ResourceContractSpec(**item) for item in raw["resource_contracts"]
        ),
    )


def _lane(name: str, raw: dict[str, Any]) -> LaneSpec:
    requirement_raw = raw.get("requirement")
    policy_raw = raw.get("requirement_policy")
    return LaneSpec(
        name=name,
        option_allowlist=frozenset(raw["option_allowlist"]),
        toolkit_inspection=bool(raw["toolkit_inspection"]),
        observations=tuple(sorted(raw["observations"].items())),
        contribution=_contribution(raw["contribution"]),
        reason_prefix=raw.get("reason_prefix"),
        raw_policy=(
            RawRequirementPolicy(
                allowed_runtimes=frozenset(policy_raw["allowed_runtimes"]),
                allowed_features=frozenset(policy_raw["allowed_features"]),
                allowed_memory_spaces=frozenset(policy_raw["allowed_memory_spaces"]),
                allowed_layouts=frozenset(policy_raw["allowed_layouts"]),
            )
            if policy_raw is not None
            else None
        ),
        requirement=(
            RequirementSpec(
                logical_device=requirement_raw["logical_device"],
                backend=requirement_raw["backend"],
                runtime=requirement_raw["runtime"],
                features=frozenset(requirement_raw["features"]),
                layouts=frozenset(requirement_raw["layouts"]),
                memory_spaces=frozenset(requirement_raw["memory_spaces"]),
                architectures=_strings(requirement_raw["architectures"]),
                reuse_domain_runtime=bool(requirement_raw["reuse_domain_runtime"]),
            )
            if requirement_raw is not None
            else None
        ),
        runtime_pins=tuple(
            RuntimePin(pin["name"], pin["version"], _strings(pin["features"]))
            for pin in raw.get("runtime_pins", ())
        ),
        required_python_fallback_backend=raw.get("required_python_fallback_backend"),
    )


DISTRIBUTION: Final[dict[str, Any]] = _SPEC["distribution"]
MANIFEST: Final[dict[str, Any]] = _SPEC["manifest"]
POLICY: Final[dict[str, Any]] = _SPEC["policy"]
OPTION_KEYS: Final[dict[str, str]] = _SPEC["option_keys"]
OBSERVATION_KEYS: Final[dict[str, str]] = _SPEC["observation_keys"]
PROBE_REPORT: Final[dict[str, Any]] = _SPEC["probe_report"]
VALIDATION_REQUIREMENT: Final[dict[str, Any]] = _SPEC["validation_requirement"]
PROBE_RUNNER: Final[dict[str, Any]] = _SPEC["probe_runner"]
TOOLKIT: Final[dict[str, Any]] = _SPEC["toolkit"]
RUNTIME_PACKAGE: Final[dict[str, str]] = _SPEC["runtime_package"]

PROVIDER_ID: Final[str] = MANIFEST["provider_id"]
BACKEND: Final[str] = MANIFEST["backend"]
ARCHITECTURES: Final[tuple[str, ...]] = _strings(MANIFEST["architectures"])
SM_PATTERN: Final[re.Pattern[str]] = re.compile(POLICY["sm_pattern"], re.ASCII)
DRIVER_VERSION_FLOOR: Final[int] = int(POLICY["driver_version_floor"])
DRIVER_VERSION_CEILING: Final[int] = int(POLICY["driver_version_ceiling"])
TOOLKIT_VERSION_FLOOR: Final[tuple[int, int]] = (
    int(POLICY["toolkit_version_floor"][0]),
    int(POLICY["toolkit_version_floor"][1]),
)
TOOLKIT_VERSION_PART_MAX: Final[int] = int(POLICY["toolkit_version_part_max"])
DEVICE_ORDINAL_MAX: Final[int] = int(POLICY["device_ordinal_max"])

REASON_TEXT: Final[dict[str, tuple[str, str]]] = {
    code: (str(text[0]), str(text[1])) for code, text in _SPEC["reason_codes"].items()
}
INCOMPATIBLE_CODES: Final[frozenset[str]] = frozenset(_SPEC["incompatible_reason_codes"])

LANES: Final[dict[str, LaneSpec]] = {
    name: _lane(name, raw) for name, raw in _SPEC["lanes"].items()
}
CAPABILITIES: Final[dict[str, CapabilitySpec]] = {
    raw["id"]: CapabilitySpec(
        id=raw["id"],
        lane=LANES[raw["lane"]],
        target_triple=raw["target_triple"],
        artifact_kinds=_strings(raw["artifact_kinds"]),
        minimum_runtime_version=raw["minimum_runtime_version"],
        minimum_driver_version=raw["minimum_driver_version"],
    )
    for raw in _SPEC["capabilities"]
}
PROBE_TARGETS: Final[dict[str, ProbeTargetSpec]] = {
    triple: ProbeTargetSpec(os=raw["os"], arch=raw["arch"], environment=raw["environment"])
    for triple, raw in _SPEC["probe_targets"].items()
}

RUNTIME_ARCHIVE_NAME: Final[str] = RUNTIME_SOURCE_ARCHIVE
RUNTIME_ARCHIVE_SHA256: Final[str] = RUNTIME_SOURCE_SHA256
RUNTIME_ARCHIVE_TOP_FOLDER: Final[str] = (
    f"{RUNTIME_PACKAGE['crate']}-{RUNTIME_PACKAGE['version']}"
)


def known_code(code: str) -> str:
    """Return ``code`` if the spec explains it; fail loudly on a typo."""
    if code not in REASON_TEXT:
        raise KeyError(f"reason code {code} is not in the provider spec")
    return code


def reason_text(code: str) -> tuple[str, str] | None:
    """The (explanation, remedy) for a code, or None for an unknown code."""
    return REASON_TEXT.get(code)
