"""What `cargo xtask test` fetched: one record per NVIDIA driver series."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Names the manifest (JSON) written by xtask/src/real_driver.rs.
MANIFEST_ENV = "REXTIO_REAL_LIBCUDA"


@dataclass(frozen=True)
class RealDriver:
    """One fetched libcuda1: its series, versions and extracted image."""

    series: str
    package_version: str
    image_version: str
    image: Path
