import pytest

from ingest_pipeline import media_types as mt
from ingest_pipeline.contract import ChunkPiece, Layout, TableCell, TableLayout
from ingest_pipeline.embedding.token_limits import split_to_limit


def test_a_piece_that_fits_is_returned_unchanged(embedder):
    piece = ChunkPiece(text="short text", bbox=(0.1, 0.1, 0.5, 0.2))
    assert split_to_limit(piece, embedder.token_offsets, embedder.max_tokens) == [piece]


def test_long_text_is_cut_into_parts_that_fit_and_lose_no_word(embedder):
    sentences = [f"Sentence number {i} talks about irrigation valve {i} in zone {i % 7}." for i in range(120)]
    text = " ".join(sentences)
    piece = ChunkPiece(
        text=text, bbox=(0.1, 0.1, 0.9, 0.9), header_path=("Ops",), embed_text="Ops\n\n" + text
    )
    parts = split_to_limit(piece, embedder.token_offsets, embedder.max_tokens)
    assert len(parts) > 2
    counts = embedder.count_tokens([p.embed_text for p in parts])
    assert max(counts) <= embedder.max_tokens
    assert " ".join(p.text for p in parts).split() == text.split()
    assert all(p.bbox == piece.bbox and p.header_path == ("Ops",) for p in parts)
    assert all(p.embed_text.startswith("Ops\n\n") for p in parts)
    assert [p.meta["token_split"]["part"] for p in parts] == list(range(1, len(parts) + 1))
    assert all(p.text.rstrip().endswith(".") for p in parts[:-1])  # cut at sentence ends


def test_a_long_table_repeats_its_header_row_in_every_part(embedder):
    rows = [["Item", "Amount", "Supplier"]] + [
        [f"widget {i}", f"{i}.00", f"supplier number {i}"] for i in range(150)
    ]
    text = "\n".join("\t".join(r) for r in rows)
    cells = tuple(
        TableCell(r, c, v, header=(r == 0)) for r, row in enumerate(rows) for c, v in enumerate(row)
    )
    piece = ChunkPiece(
        text=text,
        bbox_reason="no_geometry",
        layout=Layout(role="table", table=TableLayout(rows=len(rows), cols=3, cells=cells, header_rows=1)),
    )
    parts = split_to_limit(piece, embedder.token_offsets, embedder.max_tokens)
    assert len(parts) > 1
    assert all(p.text.split("\n")[0] == "Item\tAmount\tSupplier" for p in parts)
    assert max(embedder.count_tokens([p.text for p in parts])) <= embedder.max_tokens
    body = [line for p in parts for line in p.text.split("\n")[1:]]
    assert body == text.split("\n")[1:]
    for p in parts:
        kept_rows = {c.row for c in p.layout.table.cells}
        assert 0 in kept_rows and len(kept_rows) == len(p.text.split("\n"))


def _row(chunk_id, tokens, meta=None):
    return {
        "chunk_id": chunk_id,
        "document_id": "d",
        "page": 1,
        "bbox": None,
        "text": "x",
        "content_type": None,
        "tokens": tokens,
        "meta": meta,
    }


def test_the_token_check_fails_an_unflagged_chunk_over_the_limit():
    from ingest_pipeline.assets.profiles import chunk_map_checks

    def verdict(rows):
        return {c.check_name: c.passed for c in chunk_map_checks(rows, 256)}["within_token_limit"]

    assert verdict([_row("a", 100), _row("b", 256)])
    assert not verdict([_row("a", 100), _row("b", 300)])
    assert verdict([_row("a", 100), _row("b", 300, '{"token_overflow": true}')])


def test_the_coverage_check_flags_a_page_whose_words_are_missing():
    from ingest_pipeline.assets.profiles import page_text_check

    pages = [
        {"document_id": "d", "page": 1, "text": "alpha beta gamma delta"},
        {"document_id": "d", "page": 2, "text": "one two three"},
    ]
    full = [
        {"document_id": "d", "page": 1, "text": "Alpha beta"},
        {"document_id": "d", "page": 1, "text": "gamma, delta"},
        {"document_id": "d", "page": 2, "text": "one two three"},
    ]
    assert page_text_check(pages, full).passed
    partial = full[:1] + full[2:]
    result = page_text_check(pages, partial)
    assert not result.passed and result.metadata["count"].value == 1

    # a page's words counted with their repeats: a word said twice on the page counts twice
    from ingest_pipeline.stages.chunk_checks import page_text_finding

    repeated = [{"document_id": "d", "page": 1, "text": "alpha alpha alpha beta"}]
    assert (
        page_text_finding(repeated, [{"document_id": "d", "page": 1, "text": "beta"}]).rows[0]["covered"]
        == 0.25
    )


def test_the_coverage_check_reads_words_as_lowering_them_one_by_one_would():
    """The check lowers a page's text whole (one call) only where that gives the words
    lowering each found word would: not across a capital sigma (its lower case depends on
    the letter after it) nor a dotted capital I (it lowers to two characters)."""
    import re
    import sys

    from ingest_pipeline.stages.chunk_checks import _WORD, _words

    samples = [
        "ΟΔΟΣ'Α and ΟΔΟΣ",
        "ΣΑΣ.Σ",
        "İstanbul İİ",
        "Straße STRASSE",
        "Ǆemal ǅ",
        "naïve CAFÉ",
        "Plain Words",
    ]
    for text in samples:
        assert _words(text) == [w.lower() for w in _WORD.findall(text)], text
    # what the whole-text shortcut rests on: a character that lowers to one character
    # keeps being, or not being, a word character
    word = re.compile(r"\w")
    for point in range(sys.maxunicode + 1):
        if 0xD800 <= point <= 0xDFFF:
            continue
        char = chr(point)
        lowered = char.lower()
        assert len(lowered) != 1 or bool(word.match(char)) == bool(word.match(lowered)), hex(point)


# ---------------------------------------------------------------- long tables from every table chunker

ROWS = [("Item", "Amount", "Supplier")] + [
    (f"widget {i}", f"{i}.00", f"supplier number {i}") for i in range(90)
]


def _pages(content: bytes, media_type: str):
    from ingest_pipeline.readers import read_pages
    from ingest_pipeline.readers.base import ReadOptions

    return read_pages(content, media_type, ReadOptions(name="t"))


def csv_table():
    from ingest_pipeline.chunkers.delimited import DelimitedChunker

    return "\n".join(",".join(r) for r in ROWS).encode(), "text/csv", DelimitedChunker({"max_chars": 100000})


def xlsx_table():
    import openpyxl

    from ingest_pipeline.chunkers.xlsx import XlsxChunker
    from ingest_pipeline_tests.office_fixtures import save_xlsx

    wb = openpyxl.Workbook()
    for r in ROWS:
        wb.active.append(list(r))
    return save_xlsx(wb), mt.XLSX, XlsxChunker({"max_chars": 100000})


def docx_table():
    import docx

    from ingest_pipeline.chunkers.docx import DocxChunker
    from ingest_pipeline_tests.office_fixtures import save_docx

    doc = docx.Document()
    table = doc.add_table(rows=len(ROWS), cols=3)
    for r, row in enumerate(ROWS):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    return save_docx(doc), mt.DOCX, DocxChunker({"max_chars": 100000})


def pptx_table():
    from pptx import Presentation
    from pptx.util import Inches

    from ingest_pipeline.chunkers.pptx import PptxChunker
    from ingest_pipeline_tests.office_fixtures import save_pptx

    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[6])
    table = slide.shapes.add_table(len(ROWS), 3, Inches(0.5), Inches(0.5), Inches(9), Inches(6)).table
    for r, row in enumerate(ROWS):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    return save_pptx(prs), mt.PPTX, PptxChunker()


def pdf_table():
    from ingest_pipeline.chunkers.pdf.tables import PdfTablesChunker
    from ingest_pipeline_tests.pdf_writer import PdfWriter

    w = PdfWriter()
    page = w.page(width=612, height=1800)
    xs = [40, 200, 330, 560]
    ys = [1780 - 19 * r for r in range(len(ROWS) + 1)]
    page.grid(xs, ys)
    for r, row in enumerate(ROWS):
        for c, value in enumerate(row):
            page.text(xs[c] + 4, ys[r] - 14, value, 9)
    return w.to_bytes(), mt.PDF, PdfTablesChunker({"max_table_chars": 100000})


def markdown_table():
    from ingest_pipeline.chunkers.markdown import MarkdownChunker

    lines = ["| " + " | ".join(r) + " |" for r in ROWS]
    lines.insert(1, "|---|---|---|")
    text = "# Inventory\n\nThe stock list.\n\n" + "\n".join(lines) + "\n\nLast words.\n"
    return text.encode(), "text/markdown", MarkdownChunker()


def _rows_of(text: str) -> list[tuple[str, ...]]:
    """The table rows a part's text holds, in order (tab- or pipe-separated lines)."""
    out = []
    for line in text.split("\n"):
        if "\t" in line:
            out.append(tuple(v.strip() for v in line.split("\t")))
        elif line.startswith("|") and not line.startswith("|---"):
            out.append(tuple(v.strip() for v in line.strip("|").split("|")))
    return out


@pytest.mark.parametrize(
    "build",
    [pptx_table, markdown_table, docx_table, xlsx_table, csv_table, pdf_table],
    ids=["pptx@1", "markdown@1", "docx@1", "xlsx@1", "delimited@1", "pdf@3"],
)
def test_a_long_table_split_at_the_token_limit_keeps_headers_cells_ids_and_offsets(build, embedder):
    from ingest_pipeline.chunkers.grid import _grid_problem
    from ingest_pipeline.embedding.token_limits import relink
    from ingest_pipeline.stages.merge import Claim, merge_claims

    content, media_type, chunker = build()
    pages = _pages(content, media_type)
    answer = chunker.chunk(content, media_type, pages)
    pieces = [p for pc in answer for p in pc.pieces if p.text and "widget 42" in p.text]
    assert len(pieces) == 1, [p.text[:80] for pc in answer for p in pc.pieces]
    piece = pieces[0]
    assert embedder.count_tokens([piece.embed_text or piece.text])[0] > embedder.max_tokens
    parts = split_to_limit(piece, embedder.token_offsets, embedder.max_tokens)
    assert len(parts) >= 3
    # the embedder's batch counter (rows counted in one call, as the chunk map does) cuts the same parts
    assert split_to_limit(piece, embedder.token_offsets, embedder.max_tokens, embedder.count_tokens) == parts
    assert max(embedder.count_tokens([p.embed_text or p.text for p in parts])) <= embedder.max_tokens

    # headers: every part holding rows starts its rows with the header row
    body = []
    for part in parts:
        rows = _rows_of(part.text)
        if rows:
            assert rows[0] == ROWS[0], part.text[:200]
            body.extend(rows[1:])
    assert body == ROWS[1:]  # every row once, in order

    # cells: a part's grid is exactly its own lines, numbered as it reads
    for part in parts:
        table = part.layout.table if part.layout is not None else None
        if piece.layout is not None and piece.layout.table is not None:
            assert table is not None and table.rows == len(part.text.split("\n"))
            assert _grid_problem(part.text, table) is None
            lines = part.text.split("\n")
            for cell in table.cells:
                assert lines[cell.row].split("\t")[cell.col] == cell.text
            assert {c.row for c in table.cells if c.header} == set(range(table.header_rows)) == {0}
            assert sorted({c.row for c in table.cells}) == list(range(table.rows))
        else:
            assert table is None

    # ids, labels, neighbours and offsets in the chunk map the model sees
    claim = Claim(f"{chunker.id}@{chunker.version}", "h", answer)
    mapped = merge_claims(
        "doc",
        pages,
        [claim],
        expand=lambda ps: [split_to_limit(p, embedder.token_offsets, embedder.max_tokens) for p in ps],
    )
    assert len({c.chunk_id for c in mapped.chunks}) == len(mapped.chunks)
    assert len({c.label for c in mapped.chunks}) == len(mapped.chunks)
    final = relink([c.piece for c in mapped.chunks])
    if media_type == "text/markdown":
        source = content.decode()
        ids = [p.meta["chunk_id"] for p in final]
        assert ids == [f"chk_{n:06d}" for n in range(1, len(final) + 1)]
        for k, p in enumerate(final):
            assert p.meta["chunk_index"] == k + 1
            assert p.meta["neighbors"] == {
                "previous_chunk_id": ids[k - 1] if k else None,
                "next_chunk_id": ids[k + 1] if k + 1 < len(ids) else None,
            }
            own = source[p.meta["start_char"] : p.meta["end_char"]]
            if "repeated_header_chars" in p.meta:
                a, b = p.meta["repeated_header_chars"]
                assert p.text == source[a:b] + "\n" + own
            else:
                assert p.text == own
            assert p.meta["chars"] == len(p.text)
            first, last = p.meta["start_line"], p.meta["end_line"]
            assert source.split("\n")[first - 1 : last] == own.split("\n")
        assert len({(p.meta["start_char"], p.meta["end_char"]) for p in final}) == len(final)


def test_counting_and_splitting_see_one_window_at_a_time(embedder):
    """A long page is tokenized in windows: no tokenizer call sees more than MAX_WINDOW
    characters, and the counts and parts equal a whole-text tokenization's. A text under
    MAX_WINDOW is counted by the embedder's counter, asking for no offsets."""
    from ingest_pipeline.embedding.token_counts import MAX_WINDOW, bounded_counts, count_tokens, over_limit

    text = " ".join(f"Line {i} of the long page about pumps, valves and zone {i % 9}." for i in range(20000))
    seen = []

    def offsets(value: str):
        seen.append(len(value))
        return embedder.token_offsets(value)

    whole = len(embedder.token_offsets(text[:200000]))
    assert count_tokens(offsets, text[:200000]) == whole
    assert max(seen) <= MAX_WINDOW
    seen.clear()
    assert over_limit(offsets, text, 256) and sum(seen) < 20000  # stops after the first window
    seen.clear()
    assert bounded_counts(offsets, ["short one", text[:200000]], embedder.count_tokens) == [
        embedder.count_tokens(["short one"])[0],
        whole + 2,
    ]
    assert not seen  # the long one too, window by window, by the counter
    middle = text[:20000]  # over the first window, under MAX_WINDOW: the counter counts it
    assert bounded_counts(offsets, [middle], embedder.count_tokens) == [
        len(embedder.token_offsets(middle)) + 2
    ]
    assert not seen
    piece = ChunkPiece(text=text[:300000], bbox_reason="no_geometry")
    parts = split_to_limit(piece, offsets, embedder.max_tokens)
    assert max(seen) <= MAX_WINDOW
    assert " ".join(p.text for p in parts).split() == text[:300000].split()
    assert max(embedder.count_tokens([p.text for p in parts])) <= embedder.max_tokens


def test_the_chunk_map_grid_check_fails_a_table_part_whose_rows_do_not_match_its_text():
    from ingest_pipeline.assets.profiles import chunk_map_checks

    cells = tuple(TableCell(r, c, f"v{r}{c}") for r in range(3) for c in range(2))
    good = Layout(role="table", table=TableLayout(rows=3, cols=2, cells=cells, header_rows=1))
    stale = Layout(
        role="table", table=TableLayout(rows=9, cols=2, cells=cells, header_rows=1)
    )  # a whole-table count
    text = "v00\tv01\nv10\tv11\nv20\tv21"

    def verdict(layout):
        row = {**_row("a", 20), "document_id": "d", "page": 1, "text": text, "layout": layout.to_json()}
        return {c.check_name: c.passed for c in chunk_map_checks([row], 256)}["table_grid_consistent"]

    assert verdict(good) and not verdict(stale)
    # a cell spanning two columns over places no other cell takes passes; over one, it fails
    spanning = (TableCell(0, 0, "v00", col_span=2),) + cells[2:]
    wide = Layout(role="table", table=TableLayout(rows=3, cols=2, cells=spanning, header_rows=1))
    overlapping = Layout(role="table", table=TableLayout(rows=3, cols=2, cells=cells + spanning[:1]))
    assert verdict(wide) and not verdict(overlapping)

    # the chunk map's own summary finds the same through the same check
    import pyarrow as pa

    from ingest_pipeline.stages.chunk_map import _summary
    from ingest_pipeline.stages.merge_stored import Merged

    def summarized(layout):
        chunks = pa.table(
            {
                "label": ["page:1/chunk:0"],
                "chunker": ["pdf@3"],
                "text": [text],
                "layout": [layout.to_json()],
                "meta": pa.array([None], pa.string()),
            }
        )
        return _summary(Merged(chunks, {}, []), chunks)["table_grid_problems"]

    assert summarized(good) == [] and [p["label"] for p in summarized(stale)] == ["page:1/chunk:0"]


def test_a_profile_counts_only_the_texts_no_profile_counted_before(embedder):
    """Chunk maps of several profiles over one document share the texts' token counts:
    the second counts only its own new texts, with the counts a fresh count gives; the
    kept counts forget the oldest texts once they hold more characters than their bound."""
    from ingest_pipeline.settings import Profile
    from ingest_pipeline.stages import embedding_text

    asked: list[str] = []

    class Counting:
        model_id, dim, max_tokens = embedder.model_id, embedder.dim, embedder.max_tokens

        def count_tokens(self, texts):
            asked.extend(texts)
            return embedder.count_tokens(texts)

        def token_offsets(self, text):
            return embedder.token_offsets(text)

    marker = "sluice gate 4471"  # texts no other test counts in this process
    shared = [f"{marker}: the {n}th paragraph on valves." for n in range(6)]
    own = [f"{marker}: the line about pump {n}." for n in range(3)]
    first = embedding_text.Expander(Profile(name="layout"), Counting(), "a.pdf")
    assert first.counts(shared) == embedder.count_tokens(shared)
    assert sorted(asked) == sorted(shared)
    asked.clear()
    second = embedding_text.Expander(Profile(name="tables"), Counting(), "a.pdf")
    assert second.counts(shared + own) == embedder.count_tokens(shared + own)
    assert sorted(asked) == sorted(own)

    kept = embedding_text._Counted()
    kept.LIMIT, kept.SHARE = 2 * kept.ENTRY, 1  # room for two counts
    kept.keep("m", {t: 1 for t in shared})
    assert list(kept.counts("m", shared)) == shared[-2:]  # the newest that fit, the oldest gone
    assert kept.counts("another model", shared) == {}
