"""The generated export facts hold exactly what templates/driver-symbols.json lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rextio_device_cuda._generated import DRIVER_EXPORTS

# Read independently of the generator: the list file itself.
_LIST: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[2] / "templates" / "driver-symbols.json").read_text("utf-8")
)


def test_every_listed_export_in_list_order() -> None:
    assert list(DRIVER_EXPORTS) == [symbol["export"] for symbol in _LIST["symbols"]]


def test_each_export_carries_its_listed_facts() -> None:
    for symbol in _LIST["symbols"]:
        assert DRIVER_EXPORTS[symbol["export"]] == {
            "api": symbol["api"],
            "abi_version": symbol["abi_version"],
            "since": symbol["since"],
            "components": symbol["components"],
        }
