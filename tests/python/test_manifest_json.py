"""generated/manifest.json is the installed provider's manifest, byte for byte.

The generator writes the manifest from the provider spec as Rextio Core's
``DeviceProviderManifest.to_dict()`` gives it; the installed
provider builds its manifest through Core's own records. Serialized the same
way (keys sorted, two-space indent, LF, one final newline) the two are
identical, on every Core the suite runs against (0.1.6 and 0.1.8).
"""

from __future__ import annotations

import json
from pathlib import Path

import rextio

from rextio_device_cuda.provider import provider

MANIFEST_JSON = Path(__file__).resolve().parents[2] / "generated" / "manifest.json"


def _serialized(value: object) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode("ascii")


def test_the_generated_manifest_is_the_providers_to_dict() -> None:
    expected = _serialized(provider().manifest().to_dict())
    assert MANIFEST_JSON.read_bytes() == expected, f"Rextio Core {rextio.__version__}"


def test_the_generated_manifest_is_canonical_json() -> None:
    data = MANIFEST_JSON.read_bytes()
    assert b"\r" not in data
    assert data.endswith(b"}\n")
    assert _serialized(json.loads(data)) == data
