"""The distribution's version (0.1.0 shipped this module too)."""

from __future__ import annotations

from typing import Final

from rextio_device_cuda._provider_spec import PROVIDER_SPEC

__version__: Final[str] = PROVIDER_SPEC.distribution.version
