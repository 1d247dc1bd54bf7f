"""The README is for users: short, the two commands that matter on its first screen, every link
alive, and every example marked runnable runs.

A code block of README.md is runnable when the line before its fence is ``<!-- runnable -->``
(an HTML comment: GitHub shows nothing). The blocks run in order, each with ``bash -e -o
pipefail`` in one temporary folder, with this interpreter's bin folder first on PATH and
INGEST_DATA naming a storage root in that folder. The root is set up like the repository's own
data/ (its ingest_pipeline.toml and dagster.yaml, no documents), so a block uses the commands as
a reader types them after ``make run`` and ``. .venv/bin/activate``, and sees what the blocks
before it ingested. Mark only blocks that run offline in a few tens of seconds on 2 cores.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_LINES = 300
FIRST_SCREEN = 40
MARKER = "<!-- runnable -->"

FENCED = re.compile(r"^(`{3,}|~{3,}).*?^\1[ \t]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]+`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_SOURCE = re.compile(r"<(?:img|a)\s[^>]*?(?:src|href)=\"([^\"]+)\"", re.I)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def runnable_blocks(text: str) -> list[tuple[int, str]]:
    """(line of the block's first command, its text) for every block marked runnable."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = lines[i + 1].strip() if i + 1 < len(lines) else ""
        assert fence in ("```sh", "```bash"), (
            f"README.md:{i + 1}: {MARKER} must stand right above a ```sh fence"
        )
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"README.md:{i + 2}: the runnable block is never closed"
        blocks.append((i + 3, "\n".join(lines[i + 2 : end])))
    return blocks


def links(text: str) -> list[str]:
    """Every link and image target outside code."""
    prose = INLINE_CODE.sub("", FENCED.sub("", text))
    return LINK.findall(prose) + HTML_SOURCE.findall(prose)


def anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings (lowercase; punctuation dropped; spaces to
    hyphens; a repeated heading gets -1, -2...)."""
    found: set[str] = set()
    for heading in HEADING.findall(FENCED.sub("", text)):
        slug = re.sub(r"[^\w\- ]", "", INLINE_CODE.sub(lambda m: m.group(0)[1:-1], heading).lower())
        slug = slug.replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {MAX_LINES}): reference "
        f"belongs in docs/, figures on docs/benchmarks.md"
    )


def test_first_screen_shows_the_two_commands_and_the_graph():
    first = "\n".join(README.read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN])
    for needed in ("make run", "make test", "docs/asset_graph.png"):
        assert needed in first, f"the README's first {FIRST_SCREEN} lines lack {needed!r}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_that_exist(page: Path):
    text = page.read_text(encoding="utf-8")
    targets = links(text)
    if page == README:  # it links to docs/: finding none means the pattern broke
        assert targets, "README.md: no links found (is the link pattern still right?)"
    broken = []
    for target in targets:
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto: ...
            continue
        path_part, _, fragment = target.partition("#")
        path = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not path.exists():
            broken.append(f"{target} (no {path})")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path.read_text(encoding="utf-8")):
            broken.append(f"{target} (no heading #{fragment} in {path.name})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: " + "; ".join(broken)


def test_runnable_blocks_run(tmp_path: Path):
    blocks = runnable_blocks(README.read_text(encoding="utf-8"))
    assert blocks, f"README.md marks no block {MARKER}"
    data = tmp_path / "data"
    (data / "dagster_home").mkdir(parents=True)
    shutil.copy(ROOT / "data" / "ingest_pipeline.toml", data)
    shutil.copy(ROOT / "data" / "dagster_home" / "dagster.yaml", data / "dagster_home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_") and k != "DAGSTER_HOME"}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["INGEST_DATA"] = str(data)
    for line, code in blocks:
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", code],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, (
            f"the README's runnable block at line {line} exited {done.returncode}:\n"
            f"{code}\n--- stdout (end)\n{done.stdout[-3000:]}\n"
            f"--- stderr (end)\n{done.stderr[-3000:]}"
        )
