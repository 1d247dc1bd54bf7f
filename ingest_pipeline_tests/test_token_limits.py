from ingest_pipeline.contract import ChunkPiece, Layout, TableCell, TableLayout
from ingest_pipeline.token_limits import split_to_limit


def test_a_piece_that_fits_is_returned_unchanged(embedder):
    piece = ChunkPiece(text="short text", bbox=(0.1, 0.1, 0.5, 0.2))
    assert split_to_limit(piece, embedder.token_offsets, embedder.max_tokens) == [piece]


def test_long_text_is_cut_into_parts_that_fit_and_lose_no_word(embedder):
    sentences = [f"Sentence number {i} talks about irrigation valve {i} in zone {i % 7}." for i in range(120)]
    text = " ".join(sentences)
    piece = ChunkPiece(text=text, bbox=(0.1, 0.1, 0.9, 0.9), header_path=("Ops",), embed_text="Ops\n\n" + text)
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
    rows = [["Item", "Amount", "Supplier"]] + [[f"widget {i}", f"{i}.00", f"supplier number {i}"] for i in range(150)]
    text = "\n".join("\t".join(r) for r in rows)
    cells = tuple(TableCell(r, c, v, header=(r == 0)) for r, row in enumerate(rows) for c, v in enumerate(row))
    piece = ChunkPiece(text=text, bbox_reason="no_geometry",
                       layout=Layout(role="table", table=TableLayout(rows=len(rows), cols=3, cells=cells, header_rows=1)))
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
    return {"chunk_id": chunk_id, "bbox": None, "text": "x", "content_type": None, "tokens": tokens, "meta": meta}


def test_the_token_check_fails_an_unflagged_chunk_over_the_limit():
    from ingest_pipeline.assets.profiles import chunk_map_checks

    def verdict(rows):
        return {c.check_name: c.passed for c in chunk_map_checks(rows, 256)}["within_token_limit"]

    assert verdict([_row("a", 100), _row("b", 256)])
    assert not verdict([_row("a", 100), _row("b", 300)])
    assert verdict([_row("a", 100), _row("b", 300, '{"token_overflow": true}')])


def test_the_coverage_check_flags_a_page_whose_words_are_missing():
    from ingest_pipeline.assets.profiles import page_text_check

    pages = [{"document_id": "d", "page": 1, "text": "alpha beta gamma delta"},
             {"document_id": "d", "page": 2, "text": "one two three"}]
    full = [{"document_id": "d", "page": 1, "text": "Alpha beta"}, {"document_id": "d", "page": 1, "text": "gamma, delta"},
            {"document_id": "d", "page": 2, "text": "one two three"}]
    assert page_text_check(pages, full).passed
    partial = full[:1] + full[2:]
    result = page_text_check(pages, partial)
    assert not result.passed and result.metadata["count"].value == 1
