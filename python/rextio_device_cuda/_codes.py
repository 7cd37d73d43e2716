"""Names for the reason codes the provider logic branches on.

Each name is checked against the spec at import (``known_code``), so a code
that is misspelt here or removed from the spec fails on import, not silently.
Framework-lane codes are built from the lane's spec prefix (``lane_code``).
"""

from __future__ import annotations

from typing import Final

from rextio_device_cuda._provider_spec import PROVIDER_SPEC, LaneSpec


def known_code(code: str) -> str:
    """Return ``code`` if the spec explains it; fail loudly on a typo."""
    if code not in PROVIDER_SPEC.reason_codes:
        raise KeyError(f"reason code {code} is not in the provider spec")
    return code


def reason_text(code: str) -> tuple[str, str] | None:
    """The (explanation, remedy) for a code, or None for an unknown code."""
    return PROVIDER_SPEC.reason_codes.get(code)


def lane_code(lane: LaneSpec, suffix: str) -> str:
    """The lane-prefixed reason code ``<PREFIX><suffix>``, which must exist."""
    if lane.reason_prefix is None:
        raise KeyError("a lane without a reason prefix has no lane codes")
    return known_code(lane.reason_prefix + suffix)


# Provider preflight, in the contract's check order.
PROVIDER_ID_MISMATCH: Final = known_code("PROVIDER_ID_MISMATCH")
CAPABILITY_UNKNOWN: Final = known_code("CAPABILITY_UNKNOWN")
TARGET_MISMATCH: Final = known_code("TARGET_MISMATCH")
PROVIDER_OPTIONS_INVALID: Final = known_code("PROVIDER_OPTIONS_INVALID")
PROVIDER_OPTION_UNKNOWN: Final = known_code("PROVIDER_OPTION_UNKNOWN")
EXPLICIT_SM_REQUIRED: Final = known_code("EXPLICIT_SM_REQUIRED")
INVALID_SM: Final = known_code("INVALID_SM")
EXACTLY_ONE_CUDA_DEVICE_REQUIRED: Final = known_code("EXACTLY_ONE_CUDA_DEVICE_REQUIRED")
FRAMEWORK_RUNTIME_REUSE_UNSUPPORTED: Final = known_code("FRAMEWORK_RUNTIME_REUSE_UNSUPPORTED")
CUDA_RUNTIME_INCOMPATIBLE: Final = known_code("CUDA_RUNTIME_INCOMPATIBLE")
CUDA_FEATURE_UNSUPPORTED: Final = known_code("CUDA_FEATURE_UNSUPPORTED")
CUDA_MEMORY_SPACE_UNSUPPORTED: Final = known_code("CUDA_MEMORY_SPACE_UNSUPPORTED")
CUDA_LAYOUT_UNSUPPORTED: Final = known_code("CUDA_LAYOUT_UNSUPPORTED")
CUDA_DEVICE_REQUIREMENT_INVALID: Final = known_code("CUDA_DEVICE_REQUIREMENT_INVALID")
AT_MOST_ONE_SM_ALLOWED: Final = known_code("AT_MOST_ONE_SM_ALLOWED")
CUDA_ARCHITECTURE_UNSUPPORTED: Final = known_code("CUDA_ARCHITECTURE_UNSUPPORTED")
PROBE_CONFIGURATION_CONFLICT: Final = known_code("PROBE_CONFIGURATION_CONFLICT")
PROBE_SHA256_INVALID: Final = known_code("PROBE_SHA256_INVALID")
TOOLKIT_CONFIGURATION_CONFLICT: Final = known_code("TOOLKIT_CONFIGURATION_CONFLICT")
DEVICE_CONFIGURATION_CONFLICT: Final = known_code("DEVICE_CONFIGURATION_CONFLICT")
SM_CONFIGURATION_CONFLICT: Final = known_code("SM_CONFIGURATION_CONFLICT")
DEVICE_ORDINAL_NOT_CONFIGURED: Final = known_code("DEVICE_ORDINAL_NOT_CONFIGURED")
DEVICE_ORDINAL_INVALID: Final = known_code("DEVICE_ORDINAL_INVALID")
SM_NOT_CONFIGURED: Final = known_code("SM_NOT_CONFIGURED")
DEVICE_REQUIREMENT_MISMATCH: Final = known_code("DEVICE_REQUIREMENT_MISMATCH")
PROBE_NOT_CONFIGURED: Final = known_code("PROBE_NOT_CONFIGURED")
PROBE_TARGET_MISMATCH: Final = known_code("PROBE_TARGET_MISMATCH")
PROBE_NOT_READY: Final = known_code("PROBE_NOT_READY")
DRIVER_VERSION_UNAVAILABLE: Final = known_code("DRIVER_VERSION_UNAVAILABLE")
DRIVER_VERSION_TOO_OLD: Final = known_code("DRIVER_VERSION_TOO_OLD")
CUDA_DEVICE_NOT_FOUND: Final = known_code("CUDA_DEVICE_NOT_FOUND")
CUDA_SM_MISMATCH: Final = known_code("CUDA_SM_MISMATCH")
TOOLKIT_VERSION_TOO_OLD: Final = known_code("TOOLKIT_VERSION_TOO_OLD")
DRIVER_TOOLKIT_INCOMPATIBLE: Final = known_code("DRIVER_TOOLKIT_INCOMPATIBLE")

# Framework-lane suffixes, prefixed by the lane's ``reason_prefix``.
ARTIFACT_KIND_UNSUPPORTED_SUFFIX: Final = "ARTIFACT_KIND_UNSUPPORTED"
TOOLKIT_ROOT_UNSUPPORTED_SUFFIX: Final = "TOOLKIT_ROOT_UNSUPPORTED"
CPYTHON_REQUIRED_SUFFIX: Final = "CPYTHON_REQUIRED"
CUDA_DEVICE_UNSUPPORTED_SUFFIX: Final = "CUDA_DEVICE_UNSUPPORTED"
RUNTIME_REQUIRED_SUFFIX: Final = "RUNTIME_REQUIRED"
RUNTIME_REUSE_REQUIRED_SUFFIX: Final = "RUNTIME_REUSE_REQUIRED"
FEATURES_INCOMPATIBLE_SUFFIX: Final = "FEATURES_INCOMPATIBLE"
LAYOUT_INCOMPATIBLE_SUFFIX: Final = "LAYOUT_INCOMPATIBLE"
MEMORY_SPACE_INCOMPATIBLE_SUFFIX: Final = "MEMORY_SPACE_INCOMPATIBLE"
RUNTIME_PINS_REQUIRED_SUFFIX: Final = "RUNTIME_PINS_REQUIRED"

# Probe runner.
PROBE_PATH_NOT_ABSOLUTE: Final = known_code("PROBE_PATH_NOT_ABSOLUTE")
PROBE_NOT_FOUND: Final = known_code("PROBE_NOT_FOUND")
PROBE_NOT_EXECUTABLE: Final = known_code("PROBE_NOT_EXECUTABLE")
PROBE_DIGEST_MISMATCH: Final = known_code("PROBE_DIGEST_MISMATCH")
PROBE_TOO_LARGE: Final = known_code("PROBE_TOO_LARGE")
PROBE_PIN_SCRIPT_UNSUPPORTED: Final = known_code("PROBE_PIN_SCRIPT_UNSUPPORTED")
PROBE_EXECUTION_FAILED: Final = known_code("PROBE_EXECUTION_FAILED")
PROBE_TIMEOUT: Final = known_code("PROBE_TIMEOUT")
PROBE_OUTPUT_TOO_LARGE: Final = known_code("PROBE_OUTPUT_TOO_LARGE")
PROBE_EXIT_NONZERO: Final = known_code("PROBE_EXIT_NONZERO")

# Report parser.
PROBE_OUTPUT_INVALID: Final = known_code("PROBE_OUTPUT_INVALID")
PROBE_SCHEMA_INVALID: Final = known_code("PROBE_SCHEMA_INVALID")

# Toolkit inspector.
TOOLKIT_PATH_NOT_ABSOLUTE: Final = known_code("TOOLKIT_PATH_NOT_ABSOLUTE")
TOOLKIT_NOT_FOUND: Final = known_code("TOOLKIT_NOT_FOUND")
TOOLKIT_VERSION_UNAVAILABLE: Final = known_code("TOOLKIT_VERSION_UNAVAILABLE")
TOOLKIT_VERSION_INVALID: Final = known_code("TOOLKIT_VERSION_INVALID")
UNSUPPORTED_TARGET: Final = known_code("UNSUPPORTED_TARGET")
TOOLKIT_COMPONENT_MISSING: Final = known_code("TOOLKIT_COMPONENT_MISSING")
TOOLKIT_RUNTIME_VERSION_MISMATCH: Final = known_code("TOOLKIT_RUNTIME_VERSION_MISMATCH")
TOOLKIT_COMPONENT_INVALID: Final = known_code("TOOLKIT_COMPONENT_INVALID")


def _check_framework_codes() -> None:
    """Every framework lane must have every prefixed code in the spec."""
    suffixes = (
        ARTIFACT_KIND_UNSUPPORTED_SUFFIX,
        TOOLKIT_ROOT_UNSUPPORTED_SUFFIX,
        CUDA_DEVICE_UNSUPPORTED_SUFFIX,
        RUNTIME_REQUIRED_SUFFIX,
        RUNTIME_REUSE_REQUIRED_SUFFIX,
        FEATURES_INCOMPATIBLE_SUFFIX,
        LAYOUT_INCOMPATIBLE_SUFFIX,
        MEMORY_SPACE_INCOMPATIBLE_SUFFIX,
        RUNTIME_PINS_REQUIRED_SUFFIX,
    )
    for lane in PROVIDER_SPEC.lanes.values():
        if lane.requirement is None:
            continue
        for suffix in suffixes:
            lane_code(lane, suffix)
        if lane.required_python_fallback_backend is not None:
            lane_code(lane, CPYTHON_REQUIRED_SUFFIX)


_check_framework_codes()
