"""Public probe API: report records, the parser, the runner and the inspector.

Every name here is 0.1.0's; code written against 0.1.0 imports them
unchanged.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from rextio_device_cuda._errors import CudaProbeError
from rextio_device_cuda._report import (
    CudaDeviceRecord,
    CudaProbeReport,
    ProbeTarget,
    expected_probe_target,
    parse_probe_report,
)
from rextio_device_cuda._runner import SubprocessProbeRunner
from rextio_device_cuda._toolkit import CudaToolkitReport, FilesystemToolkitInspector
from rextio_device_cuda.config import CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR

__all__ = [
    "CUDA_TOOLKIT_RUNTIME_VERSION_FLOOR",
    "CudaDeviceRecord",
    "CudaProbeError",
    "CudaProbeReport",
    "CudaToolkitReport",
    "FilesystemToolkitInspector",
    "ProbeRunner",
    "ProbeTarget",
    "SubprocessProbeRunner",
    "ToolkitInspector",
    "expected_probe_target",
    "parse_probe_report",
]


@runtime_checkable
class ProbeRunner(Protocol):
    """Produces one probe report, or raises ``CudaProbeError``."""

    def run(self) -> CudaProbeReport:
        """Run the probe and return its validated report."""
        ...


@runtime_checkable
class ToolkitInspector(Protocol):
    """Inspects a CUDA toolkit for one target, or raises ``CudaProbeError``."""

    def inspect(self, target_triple: str) -> CudaToolkitReport:
        """Return the toolkit's version and components for ``target_triple``."""
        ...

