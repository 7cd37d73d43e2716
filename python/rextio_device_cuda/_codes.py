"""Names for the reason codes the provider logic branches on.

Each code of the spec is a name here, generated into ``_reason_codes`` (so a
misspelt or removed code fails type checking and import, not silently).
Framework-lane codes are built from the lane's spec prefix (``lane_code``).
"""

from __future__ import annotations

from typing import Final

from rextio_device_cuda._provider_spec import PROVIDER_SPEC, LaneSpec
from rextio_device_cuda._reason_codes import *  # noqa: F403


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
