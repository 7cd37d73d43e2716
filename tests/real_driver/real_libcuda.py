"""What `cargo xtask setup` fetched: one record per NVIDIA driver series."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RealDriver:
    """One fetched libcuda1: its series, versions and extracted image."""

    series: str
    package_version: str
    image_version: str
    image: Path
