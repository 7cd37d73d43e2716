"""Core records built from the spec: the manifest and the build contributions."""

from __future__ import annotations

from rextio.artifacts.models import (
    ArtifactKind,
    CertificationTier,
    DeviceRequirement,
    RuntimeRequirement,
    TargetCapability,
)
from rextio.devices import (
    DEVICE_PROVIDER_API_VERSION,
    DeviceBuildContribution,
    DeviceProviderManifest,
    DeviceResourceAccess,
    DeviceResourceContract,
    DeviceResourceOwner,
)

from rextio_device_cuda._provider_spec import (
    CAPABILITIES,
    PROVIDER_SPEC,
    CapabilitySpec,
    FrameworkLaneSpec,
    RequirementSpec,
)


def frozen_requirement(
    requirement: RequirementSpec, architectures: tuple[str, ...] | None = None
) -> DeviceRequirement:
    """A framework lane's frozen requirement; ``architectures`` replaces the declared SMs."""
    return DeviceRequirement(
        logical_device=requirement.logical_device,
        backend=requirement.backend,
        runtime=requirement.runtime,
        features=tuple(sorted(requirement.features)),
        layouts=tuple(sorted(requirement.layouts)),
        memory_spaces=tuple(sorted(requirement.memory_spaces)),
        architectures=requirement.architectures if architectures is None else architectures,
        reuse_domain_runtime=requirement.reuse_domain_runtime,
    )


def _framework_requirement(spec: CapabilitySpec) -> tuple[DeviceRequirement, ...]:
    lane = PROVIDER_SPEC.lanes[spec.lane]
    if isinstance(lane, FrameworkLaneSpec):
        return (frozen_requirement(lane.requirement),)
    return ()


def _capability(spec: CapabilitySpec) -> TargetCapability:
    manifest = PROVIDER_SPEC.manifest
    return TargetCapability(
        id=spec.id,
        target_triples=(spec.target_triple,),
        artifact_kinds=tuple(ArtifactKind(kind) for kind in spec.artifact_kinds),
        accelerator_backends=(manifest.backend,),
        minimum_runtime_version=spec.minimum_runtime_version,
        minimum_driver_version=spec.minimum_driver_version,
        architectures=tuple(item.sm for item in manifest.architectures),
        device_requirements=_framework_requirement(spec),
        certification_tier=CertificationTier(manifest.certification_tier),
        evidence_references=manifest.evidence_references,
    )


def provider_manifest() -> DeviceProviderManifest:
    """The passive manifest; never probes the host."""
    manifest = PROVIDER_SPEC.manifest
    if manifest.api_version != DEVICE_PROVIDER_API_VERSION:
        raise RuntimeError("the provider spec names a different Device Provider API version")
    return DeviceProviderManifest(
        provider_id=manifest.provider_id,
        display_name=manifest.display_name,
        provider_version=manifest.provider_version,
        backend=manifest.backend,
        api_version=DEVICE_PROVIDER_API_VERSION,
        capabilities=tuple(_capability(spec) for spec in CAPABILITIES.values()),
        runtime_requirements=tuple(
            RuntimeRequirement(name=item.name, version=item.version, features=item.features)
            for item in manifest.runtime_requirements
        ),
    )


def lane_contribution(lane_name: str) -> DeviceBuildContribution:
    """The declarative build inputs of one lane."""
    spec = PROVIDER_SPEC.lanes[lane_name].contribution
    return DeviceBuildContribution(
        cargo_features=spec.cargo_features,
        native_libraries=spec.native_libraries,
        package_references=spec.package_references,
        generated_helper_ids=spec.generated_helper_ids,
        runtime_check_ids=spec.runtime_check_ids,
        resource_contracts=tuple(
            DeviceResourceContract(
                resource_kind=item.resource_kind,
                owner=DeviceResourceOwner(item.owner),
                access=DeviceResourceAccess(item.access),
                may_allocate=item.may_allocate,
                may_replace=item.may_replace,
                may_synchronize=item.may_synchronize,
            )
            for item in spec.resource_contracts
        ),
    )
