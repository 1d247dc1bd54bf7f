"""markdown@1 on every Markdown file of the shared corpus: its structure agrees with
markdown-it-py, no significant line is lost, sizes hold, and no chunk cuts a fence or table."""

from __future__ import annotations

from pathlib import Path

import pytest

from ingest_pipeline.chunkers.markdown import MarkdownChunker
from ingest_pipeline.chunkers.markdown.blocks import Block, _fill_gaps
from ingest_pipeline.chunkers.markdown.fallback import markdown_it_blocks
from ingest_pipeline.chunkers.markdown.scanner import scan_blocks
from ingest_pipeline.contract import PageChunks, PageOutput
from ingest_pipeline.readers.text import decode_text
from ingest_pipeline_tests.conftest import CORPUS, requires_corpus

DIRS = (CORPUS / "files" / "md", CORPUS / "markdown-bench" / "files")
FILES = sorted(
    p for d in DIRS if d.is_dir() for p in d.rglob("*") if p.is_file() and p.suffix in (".md", ".mdx")
)

pytestmark = requires_corpus


def read(path: Path) -> str:
    text, _encoding, _note = decode_text(path.read_bytes())
    return text.replace("\r\n", "\n").replace("\r", "\n")


@pytest.fixture(scope="module")
def documents() -> list[tuple[Path, str]]:
    return [(p, t) for p in FILES if (t := read(p)).strip()]


def _comparable(text: str, blocks: list[Block]) -> list[tuple[str, int, int]]:
    """markdown-it gives no token for link reference definitions, and a paragraph after
    one starts a line later: fill such gaps with paragraphs and join touching ones."""
    lines = text.split("\n")
    out: list[list] = []
    for b in _fill_gaps(lines, blocks, 0, len(lines)):
        if out and b.kind == "paragraph" == out[-1][0] and out[-1][2] == b.start:
            out[-1][2] = b.end
        else:
            out.append([b.kind, b.start, b.end])
    return [tuple(x) for x in out]


def test_corpus_is_the_expected_one():
    assert len(FILES) >= 300
    assert sum(p.stat().st_size for p in FILES) > 2_000_000


def test_scanner_agrees_with_markdown_it(documents):
    disagreements = []
    for path, text in documents:
        _lines, mine = scan_blocks(text)
        ref = markdown_it_blocks(text)
        a = _comparable(text, mine)
        b = _comparable(text, ref)
        if a != b:
            disagreements.append((path.name, sorted(set(a) ^ set(b))[:4]))
        headings_mine = [(h.start, h.level) for h in mine if h.kind == "heading"]
        headings_ref = [(h.start, h.level) for h in ref if h.kind == "heading"]
        assert headings_mine == headings_ref, path.name
    assert disagreements == []


def test_every_corpus_file_chunks_within_the_guarantees(documents):
    chunker = MarkdownChunker()
    cfg = chunker.config
    for path, text in documents:
        pages = (PageOutput(page=1, status="read", reader="text@1", text=text),)
        answer = chunker.chunk(text.encode(), "text/markdown", pages)
        pieces = answer[0].pieces
        assert pieces, path.name
        outcomes = {o.name: o for o in chunker.check(b"", "text/markdown", pages, answer)}
        assert outcomes["source_lines_covered"].passed, (path.name, outcomes["source_lines_covered"].metadata)
        assert outcomes["chunk_ids_unique"].passed
        sizes = outcomes["sizes_within_bounds"]
        assert not sizes.metadata["over_max_unflagged"], path.name
        assert not sizes.metadata["overflow_not_single_block"], path.name
        assert (
            outcomes["no_heading_only_chunk"].severity == "warn" or outcomes["no_heading_only_chunk"].passed
        )

        reference = markdown_it_blocks(text)
        source_broken = any(b.kind == "code" and b.broken for b in reference)
        assert outcomes["fences_closed"].passed != source_broken, path.name

        for p in pieces:
            assert len(p.text) <= cfg.max_chars or p.meta["flags"]["is_overflow"], path.name
            if p.meta["flags"]["is_overflow"]:
                _l, inner = scan_blocks(p.text)
                assert len([b for b in inner if b.kind != "heading"]) == 1, path.name
        # no chunk starts or ends strictly inside a code block or a table
        # (1-based inclusive line numbers against 0-based half-open block maps)
        inside = set()
        for b in reference:
            if b.kind in ("code", "table"):
                inside.update(range(b.start + 1, b.end))  # 0-based lines after the first
        for p in pieces:
            start0, end0 = p.meta["start_line"] - 1, p.meta["end_line"] - 1
            assert start0 not in inside, (path.name, p.meta["chunk_id"])
            assert end0 + 1 not in inside, (path.name, p.meta["chunk_id"])


def test_corpus_metrics_are_sane(documents):
    chunker = MarkdownChunker()
    total = overflow = 0
    for _path, text in documents[:80]:
        pages = (PageOutput(page=1, status="read", reader="text@1", text=text),)
        answer = chunker.chunk(text.encode(), "text/markdown", pages)
        m = chunker.metrics(answer)
        total += m["total_chunks"]
        overflow += m["overflow_count"]
        assert m["max_chars_actual"] <= chunker.config.max_chars or m["overflow_count"] > 0
    assert total > 0 and overflow < total * 0.1


def test_answer_round_trips_through_page_chunks(documents):
    path, text = documents[0]
    pieces = MarkdownChunker().pieces(text)
    PageChunks(page=1, pieces=tuple(pieces))
