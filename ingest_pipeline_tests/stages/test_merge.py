import logging

from ingest_pipeline.contract import ChunkPiece, PageChunks, PageOutput
from ingest_pipeline.identity import chunk_id, document_id
from ingest_pipeline.stages.merge import Claim, merge_claims

PAGES = (
    PageOutput(page=1, status="read", reader="r@1", text="one"),
    PageOutput(page=2, status="read", reader="r@1", text="two"),
    PageOutput(page=3, status="failed", reader="r@1", reason="broken"),
    PageOutput(page=4, status="blank", reader="r@1", text=""),
)


def claim(ref, answers, error=None):
    return Claim(
        chunker=ref,
        config_hash="h",
        error=error,
        pages=tuple(
            PageChunks(
                page=p,
                pieces=tuple(
                    ChunkPiece(image=t, bbox=(0, 0, 1, 1))
                    if isinstance(t, bytes)
                    else ChunkPiece(text=t, bbox_reason="no_geometry")
                    for t in texts
                ),
            )
            for p, texts in answers.items()
        ),
    )


def test_first_in_order_wins_a_page_whole():  # T-B2
    first = claim("a@1", {2: ["a-two"]})
    second = claim("b@1", {1: ["b-one"], 2: ["b-two-x", "b-two-y"]})
    cmap = merge_claims("doc", PAGES, [first, second])
    texts = {(c.page, c.piece.text) for c in cmap.chunks}
    assert texts == {(1, "b-one"), (2, "a-two")}
    assert cmap.page_owner == {1: "b@1", 2: "a@1"}


def test_a_raising_chunker_is_skipped_and_logged(caplog):  # T-B3
    broken = claim("broken@3", {}, error="RuntimeError: boom")
    fallback = claim("page@1", {1: ["one"], 2: ["two"]})
    with caplog.at_level(logging.WARNING):
        cmap = merge_claims("doc", PAGES, [broken, fallback])
    assert [c.chunker for c in cmap.chunks] == ["page@1", "page@1"]
    assert "broken@3" in caplog.text


def test_text_on_failed_pages_is_dropped_and_images_kept():  # T-B4
    text_only = merge_claims("doc", PAGES, [claim("x@1", {3: ["text on a failed page"]})])
    assert text_only.chunks == ()
    assert text_only.dropped == {"failed_page_text": 1}
    with_image = merge_claims("doc", PAGES, [claim("x@1", {3: [b"\x89PNG...", "more text"]})])
    assert [c.piece.is_image for c in with_image.chunks] == [True]


def test_whitespace_pieces_use_no_index():  # F04, T-F1
    cmap = merge_claims("doc", PAGES, [claim("x@1", {1: ["a", "   \n", "b"]})])
    assert [(c.index, c.piece.text) for c in cmap.chunks] == [(0, "a"), (1, "b")]
    assert [c.label for c in cmap.chunks] == ["page:1/chunk:0", "page:1/chunk:1"]


def test_claims_for_pages_that_do_not_exist_are_dropped():
    cmap = merge_claims("doc", PAGES, [claim("x@1", {9: ["ghost"]}), claim("page@1", {1: ["one"]})])
    assert [c.page for c in cmap.chunks] == [1]
    assert cmap.dropped == {"unknown_page": 1}


def test_chunk_ids_are_deterministic_and_depend_on_every_part():
    a = merge_claims("doc", PAGES, [claim("x@1", {1: ["a", "b"]})])
    b = merge_claims("doc", PAGES, [claim("x@1", {1: ["a", "b"]})])
    assert [c.chunk_id for c in a.chunks] == [c.chunk_id for c in b.chunks]
    base = chunk_id("doc", "x@1", "h", 1, 0, "a")
    assert a.chunks[0].chunk_id == base
    variants = {
        chunk_id("doc2", "x@1", "h", 1, 0, "a"),
        chunk_id("doc", "x@2", "h", 1, 0, "a"),
        chunk_id("doc", "x@1", "h2", 1, 0, "a"),
        chunk_id("doc", "x@1", "h", 2, 0, "a"),
        chunk_id("doc", "x@1", "h", 1, 1, "a"),
        chunk_id("doc", "x@1", "h", 1, 0, "b"),
    }
    assert base not in variants and len(variants) == 6


def test_document_ids_are_partition_safe_and_stable():
    did = document_id("sources:Reports/Q3, final|v2.PDF", "Reports/Q3, final|v2.PDF")
    assert did == document_id("sources:Reports/Q3, final|v2.PDF", "Reports/Q3, final|v2.PDF")
    assert set(did) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-")
    assert did.startswith("reports-q3-final-v2-pdf-")
    assert document_id("sources:a.pdf", "a.pdf") != document_id("sources:b/a.pdf", "a.pdf")


def test_an_answer_of_zero_pieces_leaves_the_page_to_the_next_chunker():  # B36
    cmap = merge_claims("doc", PAGES, [claim("first@1", {1: []}), claim("page@1", {1: ["words"]})])
    assert cmap.page_owner == {1: "page@1"} and [c.piece.text for c in cmap.chunks] == ["words"]


def test_an_answer_that_says_what_it_left_out_keeps_its_page_with_nothing_served():
    said = Claim("first@1", "h", (PageChunks(page=1, pieces=(), left_out=("Running header 2024",)),))
    cmap = merge_claims("doc", PAGES, [said, claim("page@1", {1: ["Running header 2024"]})])
    assert cmap.page_owner == {1: "first@1"} and not cmap.chunks
