"""The files and commands the README shows, read from the README itself.

A block marked ``<!-- tested: NAME -->`` on the line before its fence is a
file or command a test runs exactly as written; each section's tests read
their own section's blocks.
"""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(
    r"^(?P<indent>[ \t]*)<!-- tested: (?P<name>[^ ]+) -->\n"
    r"(?P=indent)```[a-z]*\n(?P<body>.*?)^(?P=indent)```$",
    re.MULTILINE | re.DOTALL,
)


def readme_files(section: str) -> dict[str, str]:
    """Each tested block of the README's ``## {section}`` (up to the next
    ``## `` heading), by name, its indentation removed."""
    text = README.read_text(encoding="utf-8")
    heading = f"\n## {section}\n"
    assert text.count(heading) == 1, f"the README has no single section {section!r}"
    body = text.split(heading, 1)[1].split("\n## ", 1)[0]
    files: dict[str, str] = {}
    for match in BLOCK.finditer(body):
        indent = match["indent"]
        lines = match["body"].splitlines()
        files[match["name"]] = "".join(
            f"{line.removeprefix(indent)}\n" if line.strip() else "\n" for line in lines
        )
    return files
