"""markdown@1: acceptance tests T-M1..T-M9 and the edge cases of SPEC §2.10."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from ingest_pipeline.chunkers.markdown import MarkdownChunker
from ingest_pipeline.chunkers.markdown.scanner import scan_blocks
from ingest_pipeline.chunkers.markdown.sections import normalize_heading
from ingest_pipeline.chunkers.markdown.text import hard_split, plain_text, sentence_spans
from ingest_pipeline.contract import ChunkPiece, PageChunks, PageOutput


def page(text: str) -> tuple[PageOutput, ...]:
    return (PageOutput(page=1, status="read", reader="text@1", text=text),)


def chunk(text: str, **config) -> list[ChunkPiece]:
    answer = MarkdownChunker(config).chunk(text.encode(), "text/markdown", page(text))
    assert len(answer) == 1 and answer[0].page == 1
    return list(answer[0].pieces)


def check(text: str, pieces: list[ChunkPiece], **config) -> dict:
    chunker = MarkdownChunker(config)
    outcomes = chunker.check(text.encode(), "text/markdown", page(text), (PageChunks(1, tuple(pieces)),))
    assert [o.name for o in outcomes] == list(chunker.check_names)
    return {o.name: o for o in outcomes}


def sentences(n: int, words: int = 12, start: int = 0) -> str:
    """n distinct sentences of roughly 6*words characters each."""
    return " ".join(
        f"Sentence {k} " + " ".join(f"word{k}x{j}" for j in range(words)) + "."
        for k in range(start, start + n)
    )


# --------------------------------------------------------------------------------------
# identity, claims and import cost


def test_identity_and_defaults():
    c = MarkdownChunker()
    assert (c.id, c.version, c.builtin, c.opt_in) == ("markdown", 1, True, False)
    assert c.media_types == frozenset({"text/markdown"})
    cfg = c.config
    assert (cfg.max_chars, cfg.min_chars, cfg.target_chars, cfg.context_depth) == (1200, 80, 800, 3)
    assert cfg.merge_short and cfg.fail_on_broken_fence and not cfg.fail_on_content_loss
    assert not cfg.skip_pre_heading
    assert set(cfg.atomic_types) == {"table", "code", "list", "math", "html"}
    assert "indice" in cfg.skip_headings
    json.loads(cfg.model_dump_json())  # the config hash is taken over this JSON


def test_config_is_validated():
    with pytest.raises(ValueError):
        MarkdownChunker({"min_chars": 900})  # above target_chars
    with pytest.raises(ValueError):
        MarkdownChunker({"max_chrs": 10})


def test_disclaims_other_media_types_and_unread_pages():
    text = "# A\n\nbody\n"
    c = MarkdownChunker()
    assert c.chunk(text.encode(), "text/plain", page(text)) == ()
    blank = (PageOutput(page=1, status="blank", reader="text@1", text=""),)
    assert c.chunk(b"", "text/markdown", blank) == ()
    failed = (PageOutput(page=1, status="failed", reader="text@1", reason="boom"),)
    assert c.chunk(b"x", "text/markdown", failed) == ()


def test_module_import_does_not_load_markdown_it():
    code = (
        "import sys, ingest_pipeline.chunkers.markdown, ingest_pipeline.chunkers.headings;"
        "print([m for m in sys.modules if m.startswith(('markdown_it', 'mdit_py_plugins'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_pieces_follow_the_contract():
    text = "# Title\n\nSome text here that is long enough to be a chunk on its own, really.\n"
    (p,) = chunk(text)
    assert p.bbox is None and p.bbox_reason == "no_geometry" and p.image is None
    assert p.text == text.rstrip("\n")
    assert p.header_path == ("Title",)
    json.dumps(dict(p.meta))
    assert p.meta["start_line"] == 1 and p.meta["end_line"] == 3
    assert p.meta["chars"] == len(p.text)


# --------------------------------------------------------------------------------------
# T-M1 setext + ATX headings, '#' inside a fence


TM1 = """Guide
=====

Intro paragraph under the setext title.

## Install

```bash
# not a heading
## also not a heading
pip install thing
```

Text after the fence.
"""


def test_tm1_setext_atx_and_fence_with_hashes():
    pieces = chunk(TM1)
    paths = {p.header_path for p in pieces}
    assert paths == {("Guide",), ("Guide", "Install")}
    fence_lines = set(range(7, 13))  # 1-based lines of the fence
    for p in pieces:
        assert p.meta["start_line"] not in fence_lines - {7}
        assert not p.text.startswith("# not")
    holding = [p for p in pieces if "pip install thing" in p.text]
    assert len(holding) == 1
    assert "```bash\n# not a heading\n## also not a heading\npip install thing\n```" in holding[0].text
    assert holding[0].meta["flags"]["has_code"]
    lines, blocks = scan_blocks(TM1)
    assert [b.kind for b in blocks] == ["heading", "paragraph", "heading", "code", "paragraph"]
    assert (blocks[0].level, blocks[0].start, blocks[0].end) == (1, 0, 2)


# --------------------------------------------------------------------------------------
# T-M2 skip_pre_heading and skip_headings

TM2 = """Preamble text that comes before any heading at all in this document.

# Thesis

Body of the thesis with enough words to stand as a chunk of its own here.

## {title}

- chapter one ..... 1
- chapter two ..... 7

### Inside the index

Nested text that belongs to the skipped index subtree.

## Chapter

Chapter body text, which must survive the skipping of the index section.
"""


@pytest.mark.parametrize("title", ["Indice", "INDICE", "1. Indice", "Indice:", "**Índice**"])
def test_tm2_skip_headings_drop_the_whole_subtree(title):
    text = TM2.format(title=title)
    pieces = chunk(text)
    joined = "\n".join(p.text for p in pieces)
    assert "chapter one" not in joined and "Nested text" not in joined
    assert "Inside the index" not in joined
    assert "Chapter body text" in joined and "Body of the thesis" in joined
    assert all("Indice" not in " ".join(p.header_path) for p in pieces)
    outcomes = check(text, pieces)
    assert outcomes["source_lines_covered"].passed  # skipped lines are exempt


def test_tm2_skip_pre_heading():
    text = TM2.format(title="Index")
    kept = "\n".join(p.text for p in chunk(text))
    assert "Preamble text" in kept
    pieces = chunk(text, skip_pre_heading=True)
    assert "Preamble text" not in "\n".join(p.text for p in pieces)
    assert pieces[0].header_path == ("Thesis",)
    assert check(text, pieces, skip_pre_heading=True)["source_lines_covered"].passed
    # the same answer judged by a validator that does not know of the skip loses a line
    assert not check(text, pieces)["source_lines_covered"].passed


def test_skip_heading_normalization():
    for raw in ("Indice", "INDICE", "1. Indice", "1.2 Indice", "IV. Indice", "Índice", "Indice.", "*Indice*"):
        assert normalize_heading(raw) in ("indice",), raw
    assert normalize_heading("Indice analitico") != "indice"


def test_skip_subtree_ends_at_same_level_heading_only():
    text = (
        "# A\n\nalpha text\n\n## Bibliografia\n\nref one\n\n### Deeper\n\nref two\n\n"
        "#### Deepest\n\nref three\n\n## After\n\nafter text\n\n# B\n\nbeta text\n"
    )
    joined = "\n".join(p.text for p in chunk(text, min_chars=0, target_chars=1))
    for gone in ("ref one", "ref two", "ref three", "Deeper"):
        assert gone not in joined
    for kept in ("alpha text", "after text", "beta text"):
        assert kept in joined


def test_blocks_accumulate_while_the_chunk_is_under_target_chars():  # C46
    """Eight 200-character paragraphs (joined by blank lines): a chunk takes the next block
    only while it is still shorter than target_chars, so chunks stop near the target,
    not at max_chars (which would pack five paragraphs, 1,008 chars, into the first)."""
    paras = [f"p{k} " + ("x" * 196) + "." for k in range(8)]
    assert all(len(p) == 200 for p in paras)
    text = "\n\n".join(paras) + "\n"

    def groups(**config) -> list[list[int]]:
        return [[k for k, p in enumerate(paras) if p in piece.text] for piece in chunk(text, **config)]

    assert groups() == [[0, 1, 2, 3], [4, 5, 6, 7]]  # 604 < 800 takes a fourth; 806 stops
    assert groups(target_chars=402) == [[0, 1], [2, 3], [4, 5], [6, 7]]  # 402 is not < 402
    assert groups(target_chars=403) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert groups(target_chars=1200) == [[0, 1, 2, 3, 4], [5, 6, 7]]  # up to max_chars


# --------------------------------------------------------------------------------------
# T-M3 merging short paragraphs, hard boundaries at heading changes


def test_tm3_short_paragraphs_merge_within_a_section_only():
    text = (
        "# One\n\nShort para a.\n\nShort para b.\n\nShort para c.\n\n"
        "## Two\n\nShort para d.\n\nShort para e.\n"
    )
    pieces = chunk(text)
    assert len(pieces) == 2
    assert "Short para a." in pieces[0].text and "Short para c." in pieces[0].text
    assert "Short para d." not in pieces[0].text
    assert pieces[1].header_path == ("One", "Two")
    assert pieces[1].text.startswith("## Two")


def test_tm3_no_chunk_crosses_a_section():
    body = sentences(6)
    text = "".join(f"# H{k}\n\n{body}\n\n## H{k}.1\n\n{body}\n\n" for k in range(4))
    pieces = chunk(text)
    for p in pieces:
        _lines, blocks = scan_blocks(p.text)
        headings = [k for k, b in enumerate(blocks) if b.kind == "heading"]
        assert headings in ([], [0]), p.text[:80]
    # each section starts its own chunk
    starts = [p.text.split("\n", 1)[0] for p in pieces if p.text.startswith("#")]
    assert len(starts) == 8


def test_short_last_fragment_stays_in_section_and_is_flagged():
    text = "# A\n\n" + sentences(3) + "\n\n## B\n\nTiny.\n\n## C\n\n" + sentences(3)
    pieces = chunk(text)
    b = [p for p in pieces if p.header_path == ("A", "B")]
    assert len(b) == 1 and b[0].text == "## B\n\nTiny."
    assert b[0].meta["flags"]["is_sparse"]
    assert check(text, pieces)["sizes_within_bounds"].passed


# --------------------------------------------------------------------------------------
# T-M4 long paragraphs split at sentences


def test_tm4_long_paragraph_split_at_sentences_without_loss():
    para = sentences(26)
    assert 2900 < len(para) < 3300
    text = f"# Long\n\n{para}\n"
    pieces = chunk(text)
    assert len(pieces) >= 3
    assert all(len(p.text) <= 1200 for p in pieces)
    joined = " ".join(p.text for p in pieces)
    assert re.sub(r"\s+", " ", joined) == re.sub(r"\s+", " ", f"# Long {para}")
    for p in pieces:
        assert p.text.endswith("."), p.text[-30:]
        assert p.content_type == "section_fragment"
    assert all(check(text, pieces)[n].passed for n in ("sizes_within_bounds", "source_lines_covered"))


def test_small_sentence_fragments_are_merged_not_dropped():
    para = sentences(25) + " Ok. Yes. " + sentences(1, start=99) + " End."
    text = f"# S\n\n{para}\n"
    pieces = chunk(text)
    joined = " ".join(p.text for p in pieces)
    for tiny in ("Ok.", "Yes.", "End."):
        assert tiny in joined
    assert not any(p.text.strip() in ("Ok.", "Yes.", "End.") for p in pieces)
    assert check(text, pieces)["source_lines_covered"].passed


def test_single_sentence_over_max_is_hard_split():
    word_sentence = "Word " + " ".join(["lorem"] * 500) + "."
    nospace = "X" * 3000
    for para in (word_sentence, nospace):
        text = f"# H\n\n{para}\n"
        pieces = chunk(text)
        assert all(len(p.text) <= 1200 for p in pieces)
        assert "".join("".join(p.text.split()) for p in pieces) == "".join(f"# H{para}".split())
        assert check(text, pieces)["source_lines_covered"].passed


def test_sentence_splitting_copes_with_abbreviations_and_unicode():
    def split(s):
        return [s[a:b] for a, b in sentence_spans(s, 0, len(s))]

    assert split("Il dott. Rossi arrivò. Poi partì.") == ["Il dott. Rossi arrivò.", "Poi partì."]
    assert split("See e.g. Smith et al. Later work too.") == ["See e.g. Smith et al. Later work too."]
    assert split("Mr. J. Smith came. Then he left.") == ["Mr. J. Smith came.", "Then he left."]
    assert split("Fine. «Quote» next. Óscar came. Ústí too. Çà va. 2024 was good.") == [
        "Fine.",
        "«Quote» next.",
        "Óscar came.",
        "Ústí too.",
        "Çà va.",
        "2024 was good.",
    ]
    assert split("version 1.2 is out. it continues lowercase.") == [
        "version 1.2 is out. it continues lowercase."
    ]
    assert split('He said "Stop!" Then silence.') == ['He said "Stop!"', "Then silence."]


def test_hard_split_prefers_whitespace():
    s = "aaaa bbbb cccc dddd"
    assert [s[a:b] for a, b in hard_split(s, 0, len(s), 10)] == ["aaaa bbbb", "cccc dddd"]
    x = "x" * 25
    assert [x[a:b] for a, b in hard_split(x, 0, 25, 10)] == ["x" * 10, "x" * 10, "x" * 5]


# --------------------------------------------------------------------------------------
# T-M5 an oversized table is one overflow chunk


def table(rows: int) -> str:
    head = "| name | value | note |\n|---|---:|:---|\n"
    return head + "".join(f"| item {k} | {k * 7} | some note text {k} |\n" for k in range(rows))


def test_tm5_big_table_is_one_overflow_chunk():
    tbl = table(60)
    assert len(tbl) > 2000
    text = f"# Data\n\nA short intro line that is still a real paragraph of text here.\n\n{tbl}\nAfter.\n"
    pieces = chunk(text)
    holding = [p for p in pieces if "| item" in p.text]
    assert len(holding) == 1
    (t,) = holding
    assert t.text.strip() == tbl.strip()
    assert t.content_type == "overflow" and t.meta["flags"]["is_overflow"]
    assert t.meta["flags"]["has_table"]
    outcomes = check(text, pieces)
    assert outcomes["sizes_within_bounds"].passed
    assert outcomes["source_lines_covered"].passed


def test_table_that_fits_is_atomic_and_never_cut():
    text = "# T\n\n" + sentences(11) + "\n\n" + table(12) + "\n" + sentences(3)
    pieces = chunk(text)
    rows = [p for p in pieces if "| item" in p.text]
    assert len(rows) == 1 and rows[0].text.count("| item") == 12


def test_heading_travels_with_an_oversized_atomic_block():
    text = "## Big\n\n" + table(80)
    (p,) = chunk(text)
    assert p.text.startswith("## Big") and p.content_type == "overflow"
    out = check(text, [p])
    assert out["sizes_within_bounds"].passed and out["no_heading_only_chunk"].passed


def test_oversized_list_with_code_is_overflow():
    items = "".join(f"- item {k}\n\n  ```py\n  print({k})\n  ```\n\n" for k in range(40))
    text = "# L\n\n" + items
    pieces = chunk(text)
    (p,) = [p for p in pieces if "item 3" in p.text]
    assert p.meta["flags"]["is_overflow"] and p.meta["block_kinds"] == ["heading", "list"]
    assert check(text, pieces)["fences_closed"].passed


# --------------------------------------------------------------------------------------
# T-M6 the embedding prefix


def test_tm6_embedding_prefix():
    text = "# H1\n\n## H2\n\nBody text of the second level section, long enough.\n"
    for p in chunk(text):
        assert p.embed_text.startswith("H1 > H2\n\n")
        assert p.embed_text == "H1 > H2\n\n" + p.text
    deep = "# A\n\n## B\n\n### C\n\n#### D\n\nDeep body text under four levels of headings.\n"
    (p,) = chunk(deep)
    assert p.header_path == ("A", "B", "C", "D")
    assert p.embed_text.startswith("B > C > D\n\n")  # context_depth=3 innermost levels
    (p,) = chunk(deep, context_depth=1)
    assert p.embed_text.startswith("D\n\n")
    (p,) = chunk("plain text without any heading at all in this document\n")
    assert p.embed_text == p.text and p.header_path == ()


# --------------------------------------------------------------------------------------
# T-M7 neighbours and ids


def test_tm7_neighbours_and_sequential_ids():
    text = "".join(f"# S{k}\n\n{sentences(8)}\n\n" for k in range(5))
    pieces = chunk(text)
    ids = [p.meta["chunk_id"] for p in pieces]
    assert ids == [f"chk_{k:06d}" for k in range(1, len(pieces) + 1)]
    assert [p.meta["chunk_index"] for p in pieces] == list(range(1, len(pieces) + 1))
    assert pieces[0].meta["neighbors"]["previous_chunk_id"] is None
    assert pieces[-1].meta["neighbors"]["next_chunk_id"] is None
    for a, b in zip(pieces, pieces[1:]):
        assert a.meta["neighbors"]["next_chunk_id"] == b.meta["chunk_id"]
        assert b.meta["neighbors"]["previous_chunk_id"] == a.meta["chunk_id"]
    assert check(text, pieces)["chunk_ids_unique"].passed
    dup = [pieces[0], *pieces[:-1]]
    assert not check(text, dup)["chunk_ids_unique"].passed


# --------------------------------------------------------------------------------------
# T-M8 validator: broken fences and lost lines


def test_tm8_unclosed_fence_is_a_broken_fence_error():
    text = "# Code\n\nIntro text.\n\n```python\nx = 1\n\n# Not a heading\n\nmore text\n"
    pieces = chunk(text)
    assert all(p.header_path == ("Code",) for p in pieces)  # the tail is code, no new heading
    out = check(text, pieces)["fences_closed"]
    assert not out.passed and out.severity == "error"
    assert check(text, pieces, fail_on_broken_fence=False)["fences_closed"].severity == "warn"
    closed = text + "```\n"
    assert check(closed, chunk(closed))["fences_closed"].passed


def test_tm8_dropped_line_is_a_warning_or_an_error():
    text = "# A\n\n" + sentences(10) + "\n\n## B\n\n" + sentences(10) + "\n"
    pieces = chunk(text)
    assert check(text, pieces)["source_lines_covered"].passed
    dropped = pieces[:1] + pieces[2:]
    out = check(text, dropped)["source_lines_covered"]
    assert not out.passed and out.severity == "warn" and out.metadata["missing_lines"]
    out = check(text, dropped, fail_on_content_loss=True)["source_lines_covered"]
    assert not out.passed and out.severity == "error"


def test_validator_catches_what_the_chunker_might_get_wrong():
    text = "# A\n\n```\ncode\n```\n\n" + sentences(20) + "\n"
    good = chunk(text)
    # a chunk cut inside the fence
    cut = ChunkPiece(
        text="# A\n\n```\ncode", bbox_reason="no_geometry", meta={**good[0].meta, "end_char": 13}
    )
    out = check(text, [cut, *good[1:]])
    assert not out["fences_closed"].passed
    # an oversized chunk without the overflow flag
    big = ChunkPiece(
        text=text.rstrip("\n"),
        bbox_reason="no_geometry",
        meta={**good[0].meta, "start_char": 0, "end_char": len(text) - 1},
    )
    assert not check(text, [big])["sizes_within_bounds"].passed
    # a heading-only chunk
    head = ChunkPiece(text="# A", bbox_reason="no_geometry", meta={**good[0].meta, "end_char": 3})
    out = check(text, [head, *good])["no_heading_only_chunk"]
    assert not out.passed and out.severity == "error"
    # a chunk whose text is not the source at its offsets
    wrong = ChunkPiece(text="# B", bbox_reason="no_geometry", meta={**good[0].meta, "end_char": 3})
    out = check(text, [wrong, *good])["source_lines_covered"]
    assert not out.passed and out.severity == "error"


# --------------------------------------------------------------------------------------
# T-M9 metrics


def test_tm9_metrics_are_consistent():
    text = (
        "# M\n\n" + sentences(12) + "\n\n" + table(70) + "\n## Small\n\nTiny.\n\n## Code\n\n"
        "```\nprint(1)\n```\n\n## More\n\n" + sentences(30) + "\n"
    )
    chunker = MarkdownChunker()
    answer = chunker.chunk(text.encode(), "text/markdown", page(text))
    pieces = answer[0].pieces
    m = chunker.metrics(answer)
    sizes = [len(p.text) for p in pieces]
    assert m["total_chunks"] == len(pieces)
    assert m["total_chars"] == sum(sizes)
    assert m["min_chars_actual"] == min(sizes) and m["max_chars_actual"] == max(sizes)
    assert m["avg_chars"] == pytest.approx(sum(sizes) / len(sizes), abs=0.1)
    assert m["overflow_count"] == sum(p.meta["flags"]["is_overflow"] for p in pieces) == 1
    assert m["sparse_count"] == sum(p.meta["flags"]["is_sparse"] for p in pieces) >= 1
    assert m["atomic_count"] == sum(p.content_type == "atomic_block" for p in pieces) >= 1
    within = sum(80 <= s <= 1200 for s in sizes)
    assert m["size_compliance"] == pytest.approx(100 * within / len(sizes), abs=0.01)
    assert m["size_compliance"] < 100
    json.dumps(m)


# --------------------------------------------------------------------------------------
# §2.10 CommonMark edge cases


def test_front_matter_is_a_block_not_a_setext_heading():
    text = "---\ntitle: Test\n---\n\n# Real\n\nBody text.\n"
    lines, blocks = scan_blocks(text)
    assert [b.kind for b in blocks][:2] == ["front_matter", "heading"]
    pieces = chunk(text)
    assert all("title: Test" not in " ".join(p.header_path) for p in pieces)
    assert "title: Test" in pieces[0].text and pieces[0].header_path == ()
    assert "title: Test" not in "".join(p.text for p in chunk(text, skip_pre_heading=True))


def test_paragraph_then_dashes_is_setext_h2_not_a_break():
    text = "Some words\n---\n\nbody\n\n***\n\nafter\n"
    _lines, blocks = scan_blocks(text)
    assert [(b.kind, b.level) for b in blocks] == [
        ("heading", 2),
        ("paragraph", 0),
        ("thematic_break", 0),
        ("paragraph", 0),
    ]
    assert chunk(text)[0].header_path == ("Some words",)


def test_indented_code_with_hash_is_code():
    text = "# Top\n\nPara.\n\n    # comment in indented code\n    x = 1\n\nAfter.\n"
    _lines, blocks = scan_blocks(text)
    assert [b.kind for b in blocks] == ["heading", "paragraph", "code", "paragraph"]
    assert {p.header_path for p in chunk(text)} == {("Top",)}


def test_line_numbers_are_one_based_inclusive():
    text = "# Title\n\n- one\n- two\n\n  continued\n\nafter list\n"
    _lines, blocks = scan_blocks(text)
    lst = blocks[1]
    assert (lst.kind, lst.start, lst.end) == ("list", 2, 6)  # 0-based half-open, no trailing blank
    pieces = chunk(text, min_chars=0, target_chars=1, max_chars=30)
    assert [(p.meta["start_line"], p.meta["end_line"]) for p in pieces] == [(1, 6), (8, 8)]
    assert pieces[0].text == "# Title\n\n- one\n- two\n\n  continued"


def test_headings_in_blockquotes_and_lists_do_not_open_sections():
    text = "# Real\n\n> ## quoted heading\n> text\n\n- item\n\n  ## list heading\n\nend\n"
    pieces = chunk(text)
    assert {p.header_path for p in pieces} == {("Real",)}


def test_header_path_is_plain_text():
    text = "# The *quick* [brown](http://x.y) `fox` **jumps** ![img](a.png)\n\nbody text\n"
    (p,) = chunk(text)
    assert p.header_path == ("The quick brown fox jumps",)
    assert (
        plain_text("a \\*literal\\* star and __bold__ and ~~gone~~") == "a *literal* star and bold and gone"
    )


def test_level_jumps_and_duplicate_titles():
    text = "# A\n\n### C\n\nunder c\n\n### C\n\nsecond c\n"
    pieces = chunk(text)
    assert [p.header_path for p in pieces] == [("A", "C"), ("A", "C")]
    assert pieces[0].meta["header_levels"] == [1, 3]
    assert pieces[0].meta["header_path"] == [{"level": 1, "text": "A"}, {"level": 3, "text": "C"}]
    assert "under c" in pieces[0].text and "second c" in pieces[1].text  # a heading is a boundary


def test_heading_with_only_subheadings_travels_with_them():
    text = "# Book\n\n## Part\n\n### Chapter\n\nChapter text long enough to be counted as a body here.\n"
    (p,) = chunk(text)
    assert p.text.startswith("# Book\n\n## Part\n\n### Chapter")
    assert p.header_path == ("Book", "Part", "Chapter")
    out = check(text, [p])
    assert out["no_heading_only_chunk"].passed


def test_empty_section_before_a_sibling_is_flagged_sparse():
    text = "# A\n\nintro of A.\n\n## Empty\n\n## Full\n\nbody of the full section.\n"
    pieces = chunk(text)
    empty = [p for p in pieces if p.header_path == ("A", "Empty")]
    assert len(empty) == 1 and empty[0].text == "## Empty" and empty[0].meta["flags"]["is_sparse"]
    out = check(text, pieces)["no_heading_only_chunk"]
    assert not out.passed and out.severity == "warn"


def test_math_html_and_tables_are_atomic_blocks():
    text = (
        "# X\n\n$$\na^2 + b^2\n\n= c^2\n$$\n\n<div>\n<p>html block</p>\n</div>\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    _lines, blocks = scan_blocks(text)
    assert [b.kind for b in blocks] == ["heading", "math", "html", "table"]
    (p,) = chunk(text)
    assert p.meta["flags"]["has_math"] and p.meta["flags"]["has_table"]


def test_lazy_continuations_go_to_markdown_it():
    text = "- item one\n  ```\nlazy line\n  ```\n\n# After\n\ntext\n"
    _lines, blocks = scan_blocks(text)
    # markdown-it: the col-0 line ends the list inside its fence, and the indented fence
    # that follows opens a top-level fence that runs on
    assert [(b.kind, b.start, b.end) for b in blocks][:3] == [
        ("list", 0, 2),
        ("paragraph", 2, 3),
        ("code", 3, 8),
    ]
    text = "> quoted\nlazy continuation\n\n# H\n\nbody\n"
    _lines, blocks = scan_blocks(text)
    assert [(b.kind, b.start, b.end) for b in blocks][:2] == [("blockquote", 0, 2), ("heading", 3, 4)]


def test_crlf_and_blank_documents():
    """The bytes go through the real text reader, as in a run: CRLF and lone-CR files chunk
    like their LF form (no stray \r in any piece, same line numbers), and a file of line
    endings and spaces is a blank page markdown@1 does not claim."""
    from ingest_pipeline.readers.base import ReadOptions
    from ingest_pipeline.readers.text import TextReader

    def read_and_chunk(raw: bytes):
        pages = TextReader().read(raw, "text/markdown", ReadOptions(name="doc.md"))
        return pages, MarkdownChunker().chunk(raw, "text/markdown", pages)

    lf = "# A\n\nbody\n\n## B\n\nmore text\n"
    _, expected = read_and_chunk(lf.encode())
    assert [p.text for p in expected[0].pieces] == ["# A\n\nbody", "## B\n\nmore text"]
    for ending in ("\r\n", "\r"):
        raw = lf.replace("\n", ending).encode()
        pages, answer = read_and_chunk(raw)
        pieces = answer[0].pieces
        assert not any("\r" in p.text for p in pieces), ending
        assert [(p.text, p.header_path, p.meta["start_line"], p.meta["end_line"]) for p in pieces] == [
            (p.text, p.header_path, p.meta["start_line"], p.meta["end_line"]) for p in expected[0].pieces
        ]
        outcomes = {o.name: o for o in MarkdownChunker().check(raw, "text/markdown", pages, answer)}
        assert outcomes["source_lines_covered"].passed, ending
    for blank in (b"", b"\r\n\r\n", b" \r \n\t\r\n"):
        pages, answer = read_and_chunk(blank)
        assert [(p.status, p.text) for p in pages] == [("blank", "")]
        assert answer == ()


def test_long_block_quote_is_cut_between_its_paragraphs_never_inside_a_fence():
    paras = "\n>\n".join("> " + sentences(1, words=40, start=k) for k in range(8))
    fence = "> ```\n> code line\n>\n> # not a heading\n> ```"
    text = f"# Q\n\n{paras}\n>\n{fence}\n"
    pieces = chunk(text)
    assert len(pieces) >= 2 and all(len(p.text) <= 1200 for p in pieces)
    assert not any(p.meta["flags"]["is_overflow"] for p in pieces)
    holding = [p for p in pieces if "code line" in p.text]
    assert len(holding) == 1 and fence in holding[0].text
    for p in pieces:
        assert p.text.startswith(("# Q", "> ")) and not p.text.endswith(">")
    out = check(text, pieces)
    assert out["source_lines_covered"].passed and out["sizes_within_bounds"].passed


def test_checks_pass_for_a_document_markdown_did_not_claim():
    chunker = MarkdownChunker()
    text = "Some plain text that markdown@1 was never asked to cover."
    outcomes = chunker.check(text.encode(), "text/plain", page(text), ())
    assert [o.name for o in outcomes] == list(chunker.check_names)
    assert all(o.passed for o in outcomes)
    assert chunker.metrics(())["total_chunks"] == 0
    # a claimed document whose every line was skipped on purpose is covered too
    text = "# Indice\n\n- one\n- two\n"
    answer = chunker.chunk(text.encode(), "text/markdown", page(text))
    assert answer[0].pieces == ()
    assert all(o.passed for o in chunker.check(text.encode(), "text/markdown", page(text), answer))
