"""The toolkit inspector on hostile trees: it never blocks and never follows out of the root."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from cuda_support import ProbeFactory, ready_options, report, request_for

from rextio_device_cuda import CudaDeviceProvider
from rextio_device_cuda.probe import CudaProbeError, FilesystemToolkitInspector

LINUX = "x86_64-unknown-linux-gnu"
# Generous: a bound on a hang, never a measure of speed. Inspection of a
# small tree takes milliseconds.
HANG_BOUND_SECONDS = 60.0


def _code(root: Path, triple: str = LINUX) -> str:
    with pytest.raises(CudaProbeError) as caught:
        FilesystemToolkitInspector(root).inspect(triple)
    return caught.value.reason_code


def _release(fifo: Path) -> None:
    # A reader blocked in open() of the FIFO returns once a writer appears;
    # O_NONBLOCK: with no reader waiting this fails instead of blocking us.
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


def _without_hanging(fifo: Path, action: Callable[[], object]) -> object:
    """Runs ``action``; if it is still blocked after the bound, frees it and fails."""
    outcome: list[object] = []

    def body() -> None:
        try:
            outcome.append(action())
        except BaseException as error:  # handed to the test thread
            outcome.append(error)

    worker = threading.Thread(target=body, daemon=True)
    worker.start()
    worker.join(HANG_BOUND_SECONDS)
    if worker.is_alive():
        while worker.is_alive():
            _release(fifo)
            worker.join(0.1)
        pytest.fail(f"inspection blocked on the FIFO {fifo.name}")
    return outcome[0]


def test_a_fifo_for_version_json_is_unavailable_without_blocking(
    make_toolkit: Callable[..., Path],
) -> None:
    root = make_toolkit()
    version = root / "version.json"
    version.unlink()
    os.mkfifo(version)
    result = _without_hanging(version, lambda: _code(root))
    assert result == "TOOLKIT_VERSION_UNAVAILABLE"


def test_a_link_to_a_fifo_for_version_json_is_unavailable(
    make_toolkit: Callable[..., Path],
) -> None:
    root = make_toolkit()
    fifo = root / "fifo"
    os.mkfifo(fifo)
    (root / "version.json").unlink()
    (root / "version.json").symlink_to(fifo)
    assert _without_hanging(fifo, lambda: _code(root)) == "TOOLKIT_VERSION_UNAVAILABLE"


def test_a_fifo_component_is_missing_without_blocking(make_toolkit: Callable[..., Path]) -> None:
    root = make_toolkit()
    library = root / "lib64" / "libcudart.so"
    library.unlink()
    os.mkfifo(library)
    assert _without_hanging(library, lambda: _code(root)) == "TOOLKIT_COMPONENT_MISSING"


def test_preflight_with_a_fifo_version_json_refuses(
    probes: ProbeFactory, make_toolkit: Callable[..., Path]
) -> None:
    root = make_toolkit()
    version = root / "version.json"
    version.unlink()
    os.mkfifo(version)
    request = request_for(
        "cuda-linux-x86_64", ready_options(probes.printing(report()), toolkit_root=str(root))
    )
    result = _without_hanging(version, lambda: CudaDeviceProvider().preflight(request))
    assert getattr(result, "reason_codes", None) == ("TOOLKIT_VERSION_UNAVAILABLE",)


@pytest.mark.parametrize(
    ("document", "code"),
    [
        ({"cuda": {"version": 12.4}}, "TOOLKIT_VERSION_INVALID"),
        ({"cuda": {"version": 12}}, "TOOLKIT_VERSION_INVALID"),
        ({"cuda": {"version": None}}, "TOOLKIT_VERSION_INVALID"),
        ({"cuda": {"version": ["12.4"]}}, "TOOLKIT_VERSION_INVALID"),
        ({"cuda": {"version": "12.4\n"}}, "TOOLKIT_VERSION_INVALID"),
        ({"cuda": {"name": "CUDA SDK"}}, "TOOLKIT_VERSION_UNAVAILABLE"),
        ({"cuda": "12.4"}, "TOOLKIT_VERSION_UNAVAILABLE"),
        ({"libcublas": {"version": "12.4"}}, "TOOLKIT_VERSION_UNAVAILABLE"),
        (["cuda"], "TOOLKIT_VERSION_UNAVAILABLE"),
    ],
    ids=str,
)
def test_version_document(
    document: object, code: str, make_toolkit: Callable[..., Path]
) -> None:
    root = make_toolkit()
    (root / "version.json").write_text(json.dumps(document))
    assert _code(root) == code


def test_version_json_as_a_directory_or_outside_the_root_is_unavailable(
    tmp_path: Path, make_toolkit: Callable[..., Path]
) -> None:
    root = make_toolkit()
    version = root / "version.json"
    version.unlink()
    version.mkdir()
    assert _code(root) == "TOOLKIT_VERSION_UNAVAILABLE"
    version.rmdir()
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"cuda": {"version": "12.4"}}))
    version.symlink_to(outside)
    assert _code(root) == "TOOLKIT_VERSION_UNAVAILABLE"


def test_a_directory_component_is_missing(make_toolkit: Callable[..., Path]) -> None:
    root = make_toolkit()
    library = root / "lib64" / "libcudart.so"
    library.unlink()
    library.mkdir()
    assert _code(root) == "TOOLKIT_COMPONENT_MISSING"


def test_a_component_resolving_outside_the_root_is_missing(
    tmp_path: Path, make_toolkit: Callable[..., Path]
) -> None:
    root = make_toolkit()
    outside = tmp_path / "libcudart.so"
    outside.write_bytes(b"\x7fELF")
    header = root / "include" / "cuda.h"
    header.unlink()
    header.symlink_to(outside)
    assert _code(root) == "TOOLKIT_COMPONENT_MISSING"


def test_a_dangling_component_link_is_missing(make_toolkit: Callable[..., Path]) -> None:
    root = make_toolkit()
    library = root / "lib64" / "libcudart.so"
    library.unlink()
    library.symlink_to(root / "lib64" / "libcudart.so.12")
    assert _code(root) == "TOOLKIT_COMPONENT_MISSING"


def test_links_inside_the_root_are_followed(make_toolkit: Callable[..., Path]) -> None:
    # The usual toolkit layout: libcudart.so -> libcudart.so.12 -> the file.
    root = make_toolkit()
    library = root / "lib64" / "libcudart.so"
    library.rename(root / "lib64" / "libcudart.so.12.4.127")
    (root / "lib64" / "libcudart.so.12").symlink_to("libcudart.so.12.4.127")
    library.symlink_to("libcudart.so.12")
    inspected = FilesystemToolkitInspector(root).inspect(LINUX)
    assert inspected.components == ("cuda-header", "cuda-runtime")
    assert inspected.version == inspected.runtime_version == "12.4.1"


def test_a_later_candidate_stands_in_for_a_directory(make_toolkit: Callable[..., Path]) -> None:
    root = make_toolkit()
    library = root / "lib64" / "libcudart.so"
    library.unlink()
    library.mkdir()
    targets = root / "targets" / "x86_64-linux" / "lib"
    targets.mkdir(parents=True)
    (targets / "libcudart.so").write_bytes(b"\x7fELF")
    assert FilesystemToolkitInspector(root).inspect(LINUX).components == (
        "cuda-header",
        "cuda-runtime",
    )


def test_version_json_is_read_only_to_its_bound(make_toolkit: Callable[..., Path]) -> None:
    root = make_toolkit()
    version = json.dumps({"cuda": {"version": "12.4"}}).encode()
    (root / "version.json").write_bytes(version + b" " * (65536 - len(version)))
    assert FilesystemToolkitInspector(root).inspect(LINUX).version == "12.4"
    (root / "version.json").write_bytes(version + b" " * (65537 - len(version)))
    assert _code(root) == "TOOLKIT_VERSION_INVALID"


SWAPPER = """
import os, sys
fifo, regular, version = sys.argv[1:]
staging = version + ".staging"
print("swapping", flush=True)
while True:
    for source in (fifo, regular):
        os.link(source, staging)
        os.replace(staging, version)
"""


def test_a_fifo_swapped_in_during_inspection_never_blocks(
    tmp_path: Path, make_toolkit: Callable[..., Path]
) -> None:
    # The attack: version.json is a regular file when looked at and a FIFO
    # when opened. Another process swaps the two names as fast as it can; every
    # inspection must end with the version or TOOLKIT_VERSION_UNAVAILABLE.
    root = make_toolkit()
    version = root / "version.json"
    regular = tmp_path / "version-regular.json"
    regular.write_bytes(version.read_bytes())
    fifo = tmp_path / "version-fifo"  # keeps the FIFO named, so a blocked open can be freed
    os.mkfifo(fifo)
    # A separate process, so the swaps run truly in parallel with inspection.
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(fifo), str(regular), str(version)],
        stdout=subprocess.PIPE,
    )
    assert swapper.stdout is not None
    assert swapper.stdout.readline() == b"swapping\n"

    def inspect_many() -> set[str]:
        seen: set[str] = set()
        for _ in range(2000):
            try:
                seen.add(FilesystemToolkitInspector(root).inspect(LINUX).version)
            except CudaProbeError as error:
                seen.add(error.reason_code)
        return seen

    try:
        seen = _without_hanging(fifo, inspect_many)
    finally:
        swapper.kill()
        swapper.wait()
        swapper.stdout.close()
    assert isinstance(seen, set)
    assert seen <= {"12.4.1", "TOOLKIT_VERSION_UNAVAILABLE"}, seen
