"""rextio-device-cuda: the NVIDIA CUDA device provider for Rextio (build-only)."""

from __future__ import annotations

from typing import Final

from rextio_device_cuda._provider_spec import PROVIDER_SPEC
from rextio_device_cuda.config import CudaProviderConfig
from rextio_device_cuda.provider import CudaDeviceProvider, provider

__all__ = ["CudaDeviceProvider", "CudaProviderConfig", "__version__", "provider"]

__version__: Final[str] = PROVIDER_SPEC.distribution.version
