"""markdown@2: a paragraph that would overflow fills the chunk to a sentence boundary (SPEC
C48), and a heading with no body joins the next chunk, across a skipped section too (C50).
markdown@1 is the same file cut the old way, beside it."""

from __future__ import annotations

import json

from ingest_pipeline.chunkers.markdown import MarkdownChunker, MarkdownFilledChunker
from ingest_pipeline.contract import PageChunks
from ingest_pipeline.stages.chunk_checks import page_coverage
from ingest_pipeline_tests.chunkers.markdown.test_markdown_chunker import page, sentences

LIMITS = {"min_chars": 40, "target_chars": 300, "max_chars": 400}


def _cut(chunker, text: str):
    (answer,) = chunker.chunk(text.encode(), "text/markdown", page(text))
    return list(answer.pieces)


def _checks(chunker, text: str, pieces) -> dict:
    outcomes = chunker.check(text.encode(), "text/markdown", page(text), (PageChunks(1, tuple(pieces)),))
    return {o.name: o for o in outcomes}


def test_a_paragraph_that_would_overflow_fills_the_chunk_to_a_sentence_boundary():
    first = sentences(2, words=12)  # about 190 characters: under the target
    second = sentences(6, words=12, start=2)  # about 580: it does not fit beside the first
    text = f"# Notes\n\n{first}\n\n{second}\n"
    old = _cut(MarkdownChunker(LIMITS), text)
    new = _cut(MarkdownFilledChunker(LIMITS), text)
    assert old[0].text.endswith(first)  # markdown@1 moved the second paragraph whole
    assert len(old[0].text) < LIMITS["target_chars"]
    assert new[0].text.startswith(old[0].text) and new[0].text.endswith(".")  # a sentence's end
    assert LIMITS["target_chars"] <= len(new[0].text) <= LIMITS["max_chars"]
    rest = new[1].text
    assert rest.startswith("Sentence ") and text.index(rest) == text.index(new[0].text) + len(new[0].text) + 1
    assert " ".join(p.text for p in new).split() == " ".join(p.text for p in old).split()  # nothing lost
    assert all(o.passed for o in _checks(MarkdownFilledChunker(LIMITS), text, new).values())


def test_a_paragraph_whose_first_sentence_does_not_fit_moves_whole():
    long_sentence = "Word " * 70 + "ends here."  # one sentence of 360 characters
    text = f"# Notes\n\n{sentences(2)}\n\n{long_sentence} {sentences(1, start=9)}\n"
    old = _cut(MarkdownChunker(LIMITS), text)
    new = _cut(MarkdownFilledChunker(LIMITS), text)
    assert [p.text for p in new] == [p.text for p in old]  # no cut mid-sentence to fill a chunk


SKIPPED = (
    "# Relazione annuale\n\n"
    "## Indice\n\n1. Capitolo 1\n2. Capitolo 2\n\n"
    "## Capitolo 1\n\n" + sentences(3) + "\n"
)


def test_a_heading_with_no_body_joins_the_next_chunk_across_a_skipped_section():
    old = _cut(MarkdownChunker(), SKIPPED)
    assert old[0].text == "# Relazione annuale" and old[0].meta["flags"]["is_sparse"]  # markdown@1
    chunker = MarkdownFilledChunker()
    new = _cut(chunker, SKIPPED)
    assert len(new) == len(old) - 1 and not any(p.text.startswith("# Relazione") for p in new)
    joined = new[0]
    assert joined.text.startswith("## Capitolo 1") and "Indice" not in joined.text  # the skip stays out
    assert joined.header_path == ("Relazione annuale", "Capitolo 1")
    assert joined.embed_text.startswith("Relazione annuale > Capitolo 1")  # the model reads the title
    assert joined.meta["joined_heading"]["text"] == "# Relazione annuale"
    assert joined.meta["left_out"] == [{"role": "heading", "text": "# Relazione annuale"}]
    checks = _checks(chunker, SKIPPED, new)
    assert checks["no_heading_only_chunk"].passed and checks["source_lines_covered"].passed
    # the chunk map's coverage check reads the joined heading as accounted for
    rows = [{"document_id": "d", "page": 1, "text": p.text, "meta": json.dumps(p.meta)} for p in new]
    (covered,) = page_coverage([{"document_id": "d", "page": 1, "text": SKIPPED.split("## Indice")[0]}], rows)
    assert covered["covered"] == 1.0


def test_a_heading_with_no_body_before_a_sibling_section_stays_a_sparse_chunk():
    text = "## Empty\n\n## Indice\n\n1. a\n\n## Full\n\n" + sentences(2) + "\n"
    new = _cut(MarkdownFilledChunker(), text)
    # the sibling's heading path does not hold it, so joining would lose it: flagged instead
    assert new[0].text == "## Empty" and new[0].meta["flags"]["is_sparse"]


def test_every_chunk_lists_the_blocks_it_holds_as_records():
    """SPEC C40: id, kind, the original Markdown, its plain text, atomic, lines, the section's
    heading path and chars, for each block of each chunk (markdown@2)."""
    text = (
        "# Report **2024**\n\nRevenue grew in *every* region,\nsee [the table](#t).\n\n"
        "| region | growth |\n|---|---|\n| north | 4% |\n\n## Method\n\n```python\nrate = a / b\n```\n"
    )
    pieces = _cut(MarkdownFilledChunker(), text)
    records = [b for p in pieces for b in p.meta["blocks"]]
    assert [b["id"] for p in pieces for b in p.meta["blocks"]] == [
        i for p in pieces for i in p.meta["block_ids"]
    ]
    by_kind = {b["kind"]: b for b in records}
    lines = text.split("\n")
    for b in records:
        assert b["content"] == "\n".join(lines[b["start_line"] - 1 : b["end_line"]])
        assert b["chars"] == len(b["content"])
    assert [(b["kind"], b["atomic"]) for b in records] == [
        ("heading", False),
        ("paragraph", False),
        ("table", True),
        ("heading", False),
        ("code", True),
    ]
    assert by_kind["paragraph"]["plain_text"] == "Revenue grew in every region,\nsee the table."
    assert [b["plain_text"] for b in records if b["kind"] == "heading"] == ["Report 2024", "Method"]
    assert by_kind["code"]["plain_text"] == "rate = a / b"
    assert by_kind["code"]["header_path"] == [
        {"level": 1, "text": "Report 2024"},
        {"level": 2, "text": "Method"},
    ]
    assert "blocks" not in _cut(MarkdownChunker(), text)[0].meta  # markdown@1 lists ids and kinds only
