"""rextio-device-cuda: the NVIDIA CUDA device provider for Rextio (build-only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rextio_device_cuda.__about__ import __version__
from rextio_device_cuda.provider import CudaDeviceProvider, provider

if TYPE_CHECKING:
    from rextio_device_cuda.config import CudaProviderConfig

__all__ = ["CudaDeviceProvider", "CudaProviderConfig", "__version__", "provider"]


def __getattr__(name: str) -> object:
    # The configuration's frozen dataclass loads when it is first used: the
    # entry point's provider needs none.
    if name == "CudaProviderConfig":
        from rextio_device_cuda.config import CudaProviderConfig

        return CudaProviderConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
