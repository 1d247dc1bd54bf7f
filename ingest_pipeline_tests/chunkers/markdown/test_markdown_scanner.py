"""The line scanner behind markdown@1 finds the same top-level blocks as markdown-it-py,
on hand-picked CommonMark corner cases and on seeded random documents made of them."""

from __future__ import annotations

import random

import pytest

from ingest_pipeline.chunkers.markdown import MarkdownChunker
from ingest_pipeline.chunkers.markdown.blocks import Block, _fill_gaps
from ingest_pipeline.chunkers.markdown.fallback import markdown_it_blocks
from ingest_pipeline.chunkers.markdown.scanner import scan_blocks
from ingest_pipeline.chunkers.markdown.validation import validate


def comparable(lines: list[str], blocks: list[Block]) -> list[tuple[str, int, int]]:
    out: list[list] = []
    for b in _fill_gaps(lines, blocks, 0, len(lines)):
        if out and b.kind == "paragraph" == out[-1][0] and out[-1][2] == b.start:
            out[-1][2] = b.end
        else:
            out.append([b.kind, b.start, b.end])
    return [tuple(x) for x in out]


def same_as_markdown_it(text: str) -> tuple[list, list]:
    lines, mine = scan_blocks(text)
    return comparable(lines, mine), comparable(lines, markdown_it_blocks(text))


CASES = [
    "-\n\n   # three",  # an empty item ends at a blank line
    "-\n\n- item",  # ...but the list goes on with a sibling
    "-\n\n\n- item",  # ...not after two blank lines
    "1. one\n-\tt\n\n    ```",  # a tab after the marker counts to the next tab stop
    "[ref]: http://x\n10. ten",  # a reference definition is no paragraph
    "[^1]: note\n===",  # no setext heading over a reference definition
    "1. one\n| a | b |\n|---|---|\n<div>",  # a table cannot interrupt inside a list
    "- item\n-->\n-\n    # four\n$$\n-\tt\n\n$$ x $$",  # math that runs past a lazy list
    "> a\n- b",  # a list ends a block quote
    "> a\nlazy\n> b\n\nafter",
    "para\n    indented continuation\n# h",
    "<div>\n*not md*\n\n</div>",
    "<!-- open\n\n# still comment\n-->\n# real",
    "a | b\n--|--\n1 | 2\nfoo\n# h",
    "| a |\n|--|--|\nnot a table",
    "$$\nx\n$$ (eq1)\npara",
    "a\n$$\nx\n$$",  # math does not interrupt a paragraph
    "```\nunclosed\n# x",
    "~~~~\n~~~\n# inside\n~~~~~\n# outside",
    "``` a`b\nnot a fence",
    "Title\n===\ntext\n---",
    "- a\n---",  # a setext underline is never lazy
    "* * *\n- - -\n_ _ _",
    "  - a\n - b\n   - c\nd",
    "1) a\n2. b",  # a new delimiter starts a new list
    "\tTabbed code\n\n\tmore",
    "---\ntitle: x\n...\n# h",
    "---\nno front matter\n\n# h",
    "- a\n  ```\nlazy\n---\nafter",  # a paragraph at a region's end may be a setext heading
    "- a\n  ```\nlazy\n$$\n\nx\n$$\n- b",  # math opened inside a region runs past it
    "- a\n  ```\nlazy\n```\n\n# inside\n```",  # and so does a fence
    "> a\nlazy\n<!--\n\n# in comment\n-->",  # and an HTML comment
]


@pytest.mark.parametrize("text", CASES)
def test_corner_cases_match_markdown_it(text):
    mine, ref = same_as_markdown_it(text)
    assert mine == ref


LINES = [
    "# H1",
    "## H2 ##",
    "###### h6",
    "#nospace",
    "   # three",
    "    # four",
    "Title",
    "===",
    "---",
    "- - -",
    "***",
    "___",
    "text line",
    "more text.",
    "",
    "",
    "",
    "```",
    "```py",
    "~~~",
    "````",
    "  ```",
    "    ```",
    "$$",
    "$$ x $$",
    "$$ (eq)",
    "a $$ b",
    "> quote",
    ">",
    "> ```",
    "> # qh",
    "- item",
    "* item",
    "+ item",
    "1. one",
    "2) two",
    "10. ten",
    "-",
    "  - nested",
    "    indented",
    "\tTabbed",
    "  continued",
    "| a | b |",
    "|---|---|",
    "a | b",
    "--|--",
    "| 1 | 2 |",
    "<div>",
    "</div>",
    "<!-- c",
    "-->",
    "<Tabs>",
    "<script>",
    "</script>",
    "<?php",
    "?>",
    "<![CDATA[",
    "]]>",
    "<!DOCTYPE html>",
    "[ref]: http://x",
    "[^1]: note",
    "--",
    "  ====",
    ":::",
    "\\# esc",
    "<a href='x'>",
    "</Tab>",
    "- [ ] task",
    "1.",
    "* ```",
    "   ~~~~",
    "- > q",
    "> - l",
    ">> deep",
    " > lazy?",
    "lazy",
    "1) x",
    "3. z",
    "-\tt",
    "*\tstar",
    "~~~ info ~",
    "``` a`b",
]


def test_random_documents_match_markdown_it_and_keep_the_guarantees():
    rng = random.Random(20261130)
    chunker = MarkdownChunker({"max_chars": 200, "target_chars": 120, "min_chars": 20})
    for _ in range(1500):
        lines = [rng.choice(LINES) for _ in range(rng.randint(1, 25))]
        if rng.random() < 0.1:
            lines = ["---", "title: x", "---", *lines]
        text = "\n".join(lines)
        mine, ref = same_as_markdown_it(text)
        assert mine == ref, text
        if not text.strip():
            continue
        outcomes = {o.name: o for o in validate(text, chunker.pieces(text), chunker.config)}
        assert outcomes["source_lines_covered"].passed, text
        sizes = outcomes["sizes_within_bounds"].metadata
        assert not sizes["over_max_unflagged"] and not sizes["overflow_not_single_block"], text


def test_lazy_regions_stay_linear():
    import time

    text = "- a\n  ```\nlazy\n" * 3000
    start = time.process_time()
    lines, blocks = scan_blocks(text)
    assert time.process_time() - start < 2.0
    assert len(blocks) == 6000 and comparable(lines, blocks)[:3] == [
        ("list", 0, 2),
        ("paragraph", 2, 3),
        ("list", 3, 5),
    ]
