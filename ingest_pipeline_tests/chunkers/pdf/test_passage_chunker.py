"""pdf@4 passages on written PDFs: heading boundaries, tables alone, row splits with the
header repeated, and the token maximum in the model's own tokenizer."""

from __future__ import annotations

import shutil

import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.chunkers.pdf.passages import PdfPassagesChunker
from ingest_pipeline.contract import validate_bbox
from ingest_pipeline.embedding.minilm import MiniLMEmbedder
from ingest_pipeline_tests.chunkers.pdf.test_pdf_lines import text_pages
from ingest_pipeline_tests.pdf_writer import PdfWriter

PDF = mt.PDF
FILLER = "Net sales grew in every segment while costs of goods sold fell slightly over the year"


def _passages(content: bytes, **config):
    return PdfPassagesChunker(config).chunk(content, PDF, text_pages(content))


def _model_tokens(text: str) -> int:
    return MiniLMEmbedder().count_tokens([text])[0]  # the tokenizer the model is fed by


def _contains(outer, inner) -> bool:
    return (
        outer[0] <= inner[0] + 1e-9
        and outer[1] <= inner[1] + 1e-9
        and outer[2] >= inner[2] - 1e-9
        and outer[3] >= inner[3] - 1e-9
    )


def test_a_heading_starts_a_passage_and_leads_the_next_pages_embedding_text():
    w = PdfWriter()
    page = w.page()
    page.text(72, 720, "Our products are sold through retail and direct channels.", 10)
    page.text(72, 690, "Results of Operations", 16)
    page.text(72, 670, "Revenue rose eight percent on higher volumes this year.", 10)
    w.page().text(72, 720, "Operating margin widened as freight costs eased.", 10)
    first, second = _passages(w.to_bytes())
    assert [p.text.split("\n")[0] for p in first.pieces] == [
        "Our products are sold through retail and direct channels.",
        "Results of Operations",
    ]
    before, after = first.pieces
    assert "Revenue" in after.text and "Revenue" not in before.text
    assert after.header_path == ("Results of Operations",) and before.header_path == ()
    assert [r.role for r in after.layout.regions] == ["heading", "paragraph"]
    for piece in (before, after):
        assert all(_contains(piece.bbox, r.bbox) for r in piece.layout.regions)
    (carried,) = second.pieces
    assert carried.header_path == ("Results of Operations",)
    assert carried.embed_text == "Results of Operations\nOperating margin widened as freight costs eased."


def _table_page(w: PdfWriter, rows: int):
    p = w.page()
    p.text(72, 740, "The table below lists the quarterly figures.", 10)
    top = 720
    ys = [top - 20 * r for r in range(rows + 2)]
    p.grid([72, 250, 400], ys)
    p.text(76, top - 15, "Quarter", 10).text(254, top - 15, "Revenue", 10)
    for r in range(1, rows + 1):
        p.text(76, top - 15 - 20 * r, f"quarter {r} of the fiscal year", 10).text(
            254, top - 15 - 20 * r, f"{r * 1000}.00", 10
        )
    p.text(72, ys[-1] - 30, "Figures are unaudited and in thousands of dollars.", 10)


def test_a_table_is_a_passage_of_its_own():
    w = PdfWriter()
    _table_page(w, 3)
    (page,) = _passages(w.to_bytes())
    roles = [p.layout.role for p in page.pieces]
    assert roles == ["passage", "table", "passage"]
    table = page.pieces[1]
    assert table.text.split("\n")[0] == "Quarter\tRevenue"
    assert table.layout.table is not None and table.layout.table.rows == 4
    assert [r.role for r in table.layout.regions] == ["table"]
    assert all("Revenue" not in p.text for p in page.pieces if p is not table)


def test_a_large_table_splits_between_rows_with_its_header_repeated():
    w = PdfWriter()
    _table_page(w, 30)
    (page,) = _passages(w.to_bytes(), max_tokens=96, target_tokens=64)
    parts = [p for p in page.pieces if p.layout.role == "table"]
    assert len(parts) > 1
    body = []
    for part in parts:
        rows = part.text.split("\n")
        assert rows[0] == "Quarter\tRevenue"
        assert _model_tokens(part.embed_text or part.text) <= 96
        body += rows[1:]
    assert body == [f"quarter {r} of the fiscal year\t{r * 1000}.00" for r in range(1, 31)]


def test_no_passage_passes_the_token_maximum_and_no_text_is_lost():
    w = PdfWriter()
    page = w.page()
    page.text(72, 740, "Liquidity and Capital Resources", 16)
    for i in range(40):  # one long paragraph of forty lines
        page.text(72, 720 - 12 * i, f"{FILLER} {i}", 9)
    content = w.to_bytes()
    for max_tokens, target in ((64, 48), (224, 160)):
        (answer,) = _passages(content, max_tokens=max_tokens, target_tokens=target)
        assert len(answer.pieces) > 1
        for piece in answer.pieces:
            assert _model_tokens(piece.embed_text or piece.text) <= max_tokens
            validate_bbox(piece.bbox)
            assert piece.header_path == ("Liquidity and Capital Resources",)
        words = " ".join(p.text for p in answer.pieces).split()
        assert [w for w in words if w.isdigit()] == [str(i) for i in range(40)]


def _cover(w: PdfWriter, *titles: tuple[str, float]):
    page = w.page()
    y = 740
    for text, size in titles:
        page.text(72, y, text, size)
        y -= 2 * size
    for i in range(6):
        page.text(72, y - 16 * i, f"{FILLER} ({i}).", 10)
    return page


def test_the_first_pages_largest_short_lines_name_the_document_in_its_first_passage():
    w = PdfWriter()
    _cover(w, ("FORM 10-Q", 18), ("Acme Widgets Corp.", 26), ("Commission file number 1-2345", 10))
    w.page().text(72, 720, "Zeta Holdings Annual Review", 40).text(72, 650, FILLER, 10)  # not the first page
    first, second = _passages(w.to_bytes())
    assert first.pieces[0].meta["document_title"] == "Acme Widgets Corp."
    named = [p for pc in (first, second) for p in pc.pieces if "document_title" in p.meta]
    assert named == [first.pieces[0]]  # named once, on the first page's first passage
    assert "Acme Widgets Corp." in first.pieces[0].text  # and the text itself keeps the line

    w = PdfWriter()  # two lines in the largest size name it together, in reading order
    _cover(w, ("FORM 10-Q", 20), ("NVIDIA CORPORATION", 20))
    assert _passages(w.to_bytes())[0].pieces[0].meta["document_title"] == "FORM 10-Q NVIDIA CORPORATION"

    w = PdfWriter()  # nothing stands out from the body, or the largest line is a sentence: no title
    _cover(w, ("Notes to the statements", 11))
    assert all("document_title" not in p.meta for p in _passages(w.to_bytes())[0].pieces)
    for line in (
        "a long line set large that reads like a sentence rather than a name of anything",
        "X" * 400,
    ):
        w = PdfWriter()
        _cover(w, (line, 24))
        assert all("document_title" not in p.meta for p in _passages(w.to_bytes())[0].pieces)

    w = PdfWriter()  # and the version's config can turn it off (a new config hash, so new chunk ids)
    _cover(w, ("Acme Widgets Corp.", 26))
    assert all("document_title" not in p.meta for p in _passages(w.to_bytes(), title_size=0)[0].pieces)
    from ingest_pipeline.identity import config_hash
    from ingest_pipeline.registry import stated_config

    off, on = (config_hash("pdf@4", stated_config(PdfPassagesChunker(c))) for c in ({"title_size": 0}, None))
    assert off != on


def test_the_model_reads_the_nearest_heading_and_no_standalone_numbers_while_the_text_keeps_all():
    w = PdfWriter()
    page = w.page()
    page.text(72, 740, "Financial Statements", 20)
    page.text(72, 700, "The statements follow the accounting policies of the last annual report.", 10)
    page.text(72, 660, "Notes to the Statements", 16)
    page.text(72, 630, "Each note explains one line of the statements above in some detail.", 10)
    page.text(72, 590, "Long-Term Debt", 14)
    page.text(72, 570, "Maturities of long-term debt as of December 31, 2018 are as follows:", 10)
    w.page().text(72, 720, "After 2019 2020 2021 $ 745 $ 1,330 (1,698) 12.5% total", 10)
    (carried,) = _passages(w.to_bytes())[1].pieces
    assert carried.header_path == ("Financial Statements", "Notes to the Statements", "Long-Term Debt")
    assert carried.text == "After 2019 2020 2021 $ 745 $ 1,330 (1,698) 12.5% total"
    assert (
        carried.embed_text == "Long-Term Debt\nAfter 2019 2020 2021 total"
    )  # years stay: questions name them

    (whole,) = _passages(w.to_bytes(), embed_headings=3, embed_numbers=True)[1].pieces
    assert (
        whole.embed_text == "Financial Statements\nNotes to the Statements\nLong-Term Debt\n" + carried.text
    )
    (bare,) = _passages(w.to_bytes(), embed_headings=0)[1].pieces
    assert bare.embed_text == "After 2019 2020 2021 total"

    w = PdfWriter()  # a passage of numbers alone is read as it is, not as nothing
    w.page().text(72, 720, "745 1,330 1,698", 10)
    (alone,) = _passages(w.to_bytes())[0].pieces
    assert alone.text == "745 1,330 1,698" and alone.embed_text is None


def test_a_table_part_keeps_its_numbers_in_the_text_and_leaves_them_out_of_the_embedding_text():
    w = PdfWriter()
    _table_page(w, 30)
    (page,) = _passages(w.to_bytes(), max_tokens=96, target_tokens=64)
    parts = [p for p in page.pieces if p.layout.role == "table"]
    assert len(parts) > 1  # split while sized with every number, as before
    for part in parts:
        rows = part.text.split("\n")[1:]
        assert all(row.endswith(".00") for row in rows)
        assert part.embed_text == "\n".join(["Quarter Revenue"] + ["quarter of the fiscal year"] * len(rows))


def _short_pages(w: PdfWriter, numbers: list[str], label: str | None = None):
    """Pages whose printed number follows their one paragraph mid-page (outside the margins
    running-line detection looks at); ``label`` ends the first page instead, lower down."""
    for k, number in enumerate(numbers):
        page = w.page()
        page.text(72, 660, f"{FILLER} in {('spring', 'summer', 'autumn', 'winter', 'the end')[k]}.", 10)
        page.text(300, 350, number, 10)
        if label and k == 0:
            page.text(120, 200, label, 10)


def test_a_printed_page_number_mid_page_is_left_out_like_a_running_footer():
    w = PdfWriter()
    _short_pages(w, ["7", "8", "9", "10"])
    answer = _passages(w.to_bytes())
    for page in answer:
        (piece,) = page.pieces
        assert piece.text.startswith(FILLER) and not piece.text.rstrip().endswith(("7", "8", "9", "10"))
        assert [(o["role"], o["text"]) for o in piece.meta["left_out"]] == [
            ("page_footer", str(page.page + 6))
        ]
    kept = _passages(w.to_bytes(), page_numbers=True)
    assert [p.pieces[-1].text.split("\n")[-1] for p in kept] == ["7", "8", "9", "10"]


def test_a_lone_number_that_does_not_count_pages_stays_in_the_text():
    w = PdfWriter()
    _short_pages(w, ["4", "x", "31", "2"], label="2")  # no series: not three pages at one offset
    w.page().text(72, 720, "iv", 10)
    answer = _passages(w.to_bytes())
    texts = ["\n".join(p.text for p in page.pieces) for page in answer]
    assert texts[0].endswith("4\n2") and texts[1].endswith("x") and texts[2].endswith("31")
    assert all(
        o["role"] != "page_footer" for page in answer for p in page.pieces for o in p.meta.get("left_out", [])
    )


def test_the_row_index_finds_a_line_sharing_a_row_exactly_as_a_walk_over_the_page_does():
    """``_alone_in_row`` looks only at the lines whose tops lie near a line's own (by
    bisection); over random pages, tall lines reaching far up, touching rows and a line
    of negative height among them, its answer equals the plain walk over every line."""
    import random

    from ingest_pipeline.chunkers.pdf.passages import _alone_in_row, _Rows
    from ingest_pipeline.layout.lines import Line
    from ingest_pipeline.layout.paragraphs import Paragraph

    def walk(par, lines) -> bool:
        own = {id(ln) for ln in par.lines}
        return not any(
            id(ln) not in own
            and min(ln.y1, mine.y1) - max(ln.y0, mine.y0) > 0.5 * min(mine.y1 - mine.y0, ln.y1 - ln.y0)
            for mine in par.lines
            for ln in lines
        )

    rng = random.Random(7)
    answers = {True: 0, False: 0}
    for page in range(300):
        lines = []
        for _ in range(rng.randint(1, 40)):
            y0 = rng.uniform(0, 800)
            height = rng.choice([10.0, 12.0, rng.uniform(0, 90)])
            lines.append(Line("x", 0.0, y0, 50.0, y0 + height, 0, height))
        if page % 50 == 0:
            lines.append(Line("odd", 0.0, 400.0, 50.0, 390.0, 0, 10.0))  # negative height: the whole walk
        rows = _Rows(lines)
        for _ in range(5):
            par = Paragraph(lines=rng.sample(lines, rng.randint(1, min(3, len(lines)))))
            expected = walk(par, lines)
            assert _alone_in_row(par, rows) == expected
            answers[expected] += 1
    assert answers[True] > 100 and answers[False] > 100  # both answers were exercised


def test_a_kept_weights_list_is_handed_out_as_a_copy():
    """The page extras memo gives every caller its own list: changing one changes neither
    the memo nor the next caller's."""
    from ingest_pipeline.chunkers.pdf.page_layer import PageExtrasMemo

    memo = PageExtrasMemo()
    weights = [400, 700, 400]
    memo.put((b"doc", 1, "weights"), weights, 88)
    weights.append(900)
    first = memo.get((b"doc", 1, "weights"))
    assert first == [400, 700, 400]
    first[0] = 100
    assert memo.get((b"doc", 1, "weights")) == [400, 700, 400]
    nested = {"grid": [[1, 2]]}
    memo.put((b"doc", 1, "grids"), nested, 200)
    memo.get((b"doc", 1, "grids"))["grid"][0].append(3)
    assert memo.get((b"doc", 1, "grids")) == {"grid": [[1, 2]]}


STAMP = "VerDate 2024 Jkt 262001 on DSKJLSW7X2PROD with PROPOSALS"


def _two_column_pages(w: PdfWriter, pages: int, stamp: bool = True):
    """Pages of two columns of body text, each with a print stamp run up its left margin
    (the page's number in it changes, the rest does not)."""
    for k in range(pages):
        page = w.page()
        for row in range(12):
            y = 700 - 14 * row
            page.text(72, y, f"Left column line {row} of notice {k} on barley imports", 9)
            page.text(320, y, f"Right column line {row} of notice {k} on wheat exports", 9)
        if stamp:
            page.rotated_text(30, 200, f"{STAMP} page {k + 1}", size=7)


def test_a_stamp_up_the_side_margin_of_most_pages_is_left_out_and_no_passage_spans_both_columns():
    w = PdfWriter()
    _two_column_pages(w, 4)
    answer = _passages(w.to_bytes())
    pieces = [p for page in answer for p in page.pieces]
    assert pieces and not any("DSKJLSW7X2PROD" in p.text for p in pieces)  # not served as text
    left_out = [o["text"] for page in answer for o in page.pieces[0].meta.get("left_out", [])]
    assert len(left_out) == 4 and all("DSKJLSW7X2PROD" in t for t in left_out)  # but said so
    for p in pieces:  # each passage within one column
        assert p.bbox[2] < 0.5 or p.bbox[0] > 0.5, (p.text[:60], p.bbox)
    words = " ".join(p.text for p in pieces)
    assert "barley" in words and "wheat" in words
    kept = _passages(w.to_bytes(), side_running_lines=False)  # the setting restores the old cut
    assert any("DSKJLSW7X2PROD" in p.text for page in kept for p in page.pieces)


def test_a_side_margin_line_on_too_few_pages_stays_text():
    w = PdfWriter()
    _two_column_pages(w, 6, stamp=False)
    for k in (0, 3):  # on two of six pages only
        w.pages[k].rotated_text(30, 200, STAMP, size=7)
    answer = _passages(w.to_bytes())
    assert sum("DSKJLSW7X2PROD" in p.text for page in answer for p in page.pieces) == 2


def test_a_page_of_running_lines_only_is_claimed_empty_saying_what_it_left_out():
    """B36 with pdf@4's intent: a page that holds nothing but the running header is answered
    with zero pieces that say what was left out, so it wins its page (no other chunker
    serves the header); a page with text keeps its pieces and says nothing there."""
    w = PdfWriter()
    for k in range(4):
        page = w.page()
        page.text(72, 760, "ACME Corporation Annual Report", 9)
        if k != 2:
            page.text(72, 660, f"{FILLER} in quarter {k + 1}.", 10)
    answer = _passages(w.to_bytes())
    empty = [p for p in answer if not p.pieces]
    assert [p.page for p in empty] == [3] and empty[0].left_out == ("ACME Corporation Annual Report",)
    assert empty[0].claims and all(p.claims and not p.left_out for p in answer if p.pieces)


def _long_section() -> bytes:
    w = PdfWriter()
    page = w.page()
    page.text(72, 740, "Liquidity and Capital Resources", 16)
    for i in range(50):  # paragraphs of two lines each
        page.text(72, 720 - 12 * i, f"{FILLER} {i}", 9)
    return w.to_bytes()


def _sized(limit: int, tmp_path, **config):
    from ingest_pipeline.embedding.sizing import tokenizer_sizing

    copy = tmp_path / f"tokenizer-{limit}.json"  # the same counts: only the limit differs
    shutil.copy(MiniLMEmbedder.tokenizer_path(), copy)
    return PdfPassagesChunker(config).sized_for(tokenizer_sizing(str(copy), limit))


def test_passages_are_sized_to_the_embedder_s_limit_with_a_config_hash_of_their_own(tmp_path):
    from ingest_pipeline.embedding.sizing import minilm_sizing
    from ingest_pipeline.registry import ChunkerRegistry

    content = _long_section()
    bundled = PdfPassagesChunker()
    wide = _sized(512, tmp_path)
    assert (wide.packing().target_tokens, wide.packing().max_tokens) == (320, 480)
    answers = {}
    for name, chunker in (("bundled", bundled), ("wide", wide)):
        (answer,) = chunker.chunk(content, PDF, text_pages(content))
        answers[name] = [_model_tokens(p.embed_text or p.text) for p in answer.pieces]
        words = " ".join(p.text for p in answer.pieces).split()
        assert [w for w in words if w.isdigit()] == [str(i) for i in range(50)]
    assert max(answers["bundled"]) <= 224 < max(answers["wide"]) <= 480
    assert len(answers["wide"]) < len(answers["bundled"])
    # the sizing is stated in the config the hash covers; the bundled model's states nothing
    registry = ChunkerRegistry()
    assert bundled.environment() == {}
    assert wide.environment()["sizing"]["limit"] == 512
    assert registry.info(wide).config_hash != registry.info(bundled).config_hash
    same = bundled.sized_for(minilm_sizing())
    assert same.sizing is None and registry.info(same).config_hash == registry.info(bundled).config_hash
    # a target and maximum the configuration states are kept, within the embedder's limit
    stated = _sized(512, tmp_path, max_tokens=300, target_tokens=200).packing()
    assert (stated.target_tokens, stated.max_tokens) == (200, 300)
    with pytest.raises(ValueError, match="passes the embedder's limit of 128"):
        _sized(128, tmp_path, max_tokens=200, target_tokens=100)
    narrow = _sized(128, tmp_path)
    assert (narrow.packing().target_tokens, narrow.packing().max_tokens) == (80, 96)
    (answer,) = narrow.chunk(content, PDF, text_pages(content))
    assert max(_model_tokens(p.embed_text or p.text) for p in answer.pieces) <= 96
