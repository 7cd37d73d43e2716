"""The README as a newcomer meets it: its first screen, its width and length,
and every block it (or docs/manual-host.md, which it links) shows either run
by a test or, where it needs a person's values, naming only commands and
options that exist.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from readme_blocks import MANUAL_HOST, README, REPOSITORY, Fenced, fenced_blocks

# The documents whose blocks are held to the rule, and the sections whose
# tested blocks a test reads by name: tests/downstream/test_user_path.py
# ("Use it with Rextio") and tests/e2e/manual_host.py ("The program").
TESTED_SECTIONS = {README: "Use it with Rextio", MANUAL_HOST: "The program"}
# The documents the README's restructuring wrote, held to the same width.
DOCUMENTS = (README, MANUAL_HOST, REPOSITORY / "docs" / "maintainers.md")
MAX_LINES = 400
MAX_COLUMNS = 100
FIRST_SCREEN = 60
# What xtask's dispatch accepts: `"name" => ...` arms of its main.
XTASK_MAIN = REPOSITORY / "xtask" / "src" / "main.rs"


def _outside_fences(text: str) -> list[tuple[int, str]]:
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def test_the_readme_is_at_most_400_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, len(lines)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_line_outside_a_quoted_output_fits_100_columns(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    outside = _outside_fences(text)
    wide = [(number, len(line)) for number, line in outside if len(line) > MAX_COLUMNS]
    assert wide == [], f"{document.name}: (line, columns) {wide}"
    # Code a reader copies fits too; a quoted `text` block shows another
    # program's output as it is (the width of ours is that program's test).
    for block in fenced_blocks(document):
        if block.language != "text":
            wide_code = [line for line in block.body.splitlines() if len(line) > MAX_COLUMNS]
            assert wide_code == [], f"{document.name}: {block.what}"


def test_the_first_screen_says_how_to_build_test_install_and_use_it() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()

    def first(pattern: str) -> int:
        matching = [number for number, line in enumerate(lines) if re.search(pattern, line)]
        assert matching, pattern
        return matching[0]

    assert first(r"^\s*cargo xtask dist\s") < first(r"^\s*cargo xtask test\s") < FIRST_SCREEN
    assert first(r"^## Use it with Rextio$") < first(r"python -m pip install ") < FIRST_SCREEN
    assert first(r"\(docs/maintainers\.md\)") < FIRST_SCREEN


def _blocks() -> list[tuple[Path, Fenced]]:
    return [(document, block) for document in TESTED_SECTIONS for block in fenced_blocks(document)]


def test_every_block_is_run_by_a_test_or_marked_by_hand() -> None:
    blocks = _blocks()
    unmarked = [(document.name, block.body[:60]) for document, block in blocks if not block.kind]
    assert unmarked == []
    for document, block in blocks:
        if block.kind == "tested":
            # Only the sections the tests read hold a block they run.
            assert block.section == TESTED_SECTIONS[document], (document.name, block.what)
    for document in TESTED_SECTIONS:
        names = [block.what for block in fenced_blocks(document) if block.kind == "tested"]
        assert len(names) == len(set(names)), names
    assert any(block.kind == "by hand" for _, block in blocks)


def _xtask_commands() -> set[str]:
    arm = re.compile(r'^\s*"([a-z-]+)"(?: \| "[^"]+")* =>', re.MULTILINE)
    return set(arm.findall(XTASK_MAIN.read_text(encoding="utf-8")))


def _help(command: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rextio_device_cuda", command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _commands(block: Fenced) -> list[list[str]]:
    """The block's commands, continuation lines joined, comments dropped."""
    text = block.body.replace("\\\n", " ")
    lines = (line.split("#", 1)[0].split() for line in text.splitlines())
    return [words for words in lines if words]


def test_every_by_hand_command_names_commands_and_options_that_exist() -> None:
    xtask = _xtask_commands()
    assert {"dist", "test", "demo", "setup"} <= xtask, xtask
    checked = 0
    for document, block in _blocks():
        if block.kind != "by hand":
            continue
        assert block.language == "sh", (document.name, block.what)
        for words in _commands(block):
            if words[:2] == ["cargo", "xtask"]:
                assert words[2] in xtask, words
            elif words[:3] == ["python", "-m", "rextio_device_cuda"]:
                usage = _help(words[3])
                for option in (word.strip("[]") for word in words[4:]):
                    if option.startswith("--"):
                        assert re.search(rf"(?<![\w-]){option}(?![\w-])", usage), (words[3], option)
            else:
                pytest.fail(f"{document.name}: a by-hand command no test checks: {words}")
            checked += 1
    assert checked >= 4, checked


def test_every_link_of_the_readme_names_a_file_of_the_repository() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\((?!https?://)([^)#]+)\)", text)
    assert links, "the README links no document"
    assert [link for link in links if not (REPOSITORY / link).is_file()] == []
    assert "docs/maintainers.md" in links
    assert "docs/manual-host.md" in links
