"""What `cargo xtask setup` fetched: one record per NVIDIA driver series."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

# What cuDriverGetVersion returned for each series when these checks were
# first run against the real libraries (CUDA 12.2, 12.4 and 12.5); the arm64
# builds of a series answer the same (tests/emulated).
OBSERVED_CUDA_VERSION = {"535": 12020, "550": 12040, "555": 12050}


class DriverImage(Protocol):
    """What a platform layout needs of a fetched driver, on any architecture:
    its series and the extracted ``libcuda.so.<image_version>``."""

    @property
    def series(self) -> str: ...

    @property
    def image_version(self) -> str: ...

    @property
    def image(self) -> Path: ...


@dataclass(frozen=True)
class RealDriver:
    """One fetched libcuda1: its series, versions, extracted image and the
    packages themselves (libcuda1, and nvidia-alternative, whose postinst
    makes Debian's alternatives chain)."""

    series: str
    package_version: str
    image_version: str
    image: Path
    deb: Path
    alternative_deb: Path
