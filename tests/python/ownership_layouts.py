"""Runs the shared table of ownership cases (probe/tests/ownership_cases.json)
through ``_root_owned.review``; the Rust loader's tests run the same table.

Run as root inside a private mount namespace (``unshare -m --propagation
private``): each case is laid out on a fresh tmpfs mounted at the given
directory, so nothing is planted on the host's own filesystems. Prints one
JSON object: each case's name and the verdict (``accepted``, ``absent`` or
the rule that refused).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from rextio_device_cuda import _root_owned


def _tool(name: str) -> str:
    program = shutil.which(name)
    assert program is not None, f"util-linux's {name} is needed"
    return program


def _mount(*arguments: str) -> None:
    subprocess.run([_tool("mount"), *arguments], check=True)


def _lay_out(base: Path, entry: dict[str, Any], other_uid: int) -> None:
    path = base / entry["path"]
    kind = entry["kind"]
    if kind == "dir":
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "file":
        path.write_bytes(b"\x7fELF")
    elif kind == "symlink":
        path.symlink_to(entry["target"])
    elif kind == "hardlink":
        os.link(base / entry["target"], path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "chain":
        # path -> hop1 -> ... -> hop(links-1) -> target: `links` links in all.
        names = [path.name] + [f"{path.name}.hop{index}" for index in range(1, entry["links"])]
        for name, following in zip(names, [*names[1:], entry["target"]], strict=True):
            (path.parent / name).symlink_to(following)
    else:
        raise ValueError(f"unknown layout kind {kind!r}")
    if "mode" in entry and kind != "symlink":
        os.chmod(path, int(entry["mode"], 8))
    owner = other_uid if entry.get("owner") == "other" else 0
    os.lchown(path, owner, owner)


def verdict(base: Path, case: dict[str, Any], other_uid: int) -> str:
    for directory in ("", "usr", "usr/lib", "usr/lib/nvidia"):
        (base / directory).mkdir(exist_ok=True)
        (base / directory).chmod(0o755)
    for entry in case["layout"]:
        _lay_out(base, entry, other_uid)
    if case.get("read_only"):
        usr = str(base / "usr")
        _mount("--bind", usr, usr)
        _mount("-o", "remount,bind,ro", usr)
    finding = _root_owned.review(str(base / case["candidate"]))
    return "accepted" if finding is None else finding.rule


def main() -> None:
    table = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    mount_point = Path(sys.argv[2])
    verdicts = {}
    for case in table["cases"]:
        _mount("-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(mount_point))
        try:
            verdicts[case["name"]] = verdict(mount_point / "base", case, table["other_uid"])
        finally:
            subprocess.run([_tool("umount"), "-R", str(mount_point)], check=True)
    json.dump(verdicts, sys.stdout)


if __name__ == "__main__":
    main()
