"""lines@1 (T-N1) and lines@2 (T-L3) on located lines made by hand."""

from __future__ import annotations

from ingest_pipeline.chunkers.lines import LineParagraphsChunker, LinesChunker
from ingest_pipeline.contract import LocatedLine, PageOutput, validate_bbox

SPACE = (1000.0, 2000.0)


def page(lines, number: int = 1) -> PageOutput:
    return PageOutput(
        page=number,
        status="read",
        reader="rapidocr@1",
        text="\n".join(line.text for line in lines or ()) or "x",
        lines=lines,
    )


def test_three_lines_three_chunks_and_no_lines_disclaimed():  # T-N1
    lines = (
        LocatedLine("First line", (100, 100, 600, 140), SPACE),
        LocatedLine("Second line", (100, 160, 640, 200), SPACE),
        LocatedLine("Third", (100, 220, 300, 260), SPACE),
    )
    pages = (page(lines), page(None, 2), page((), 3))
    (answer,) = LinesChunker().chunk(b"", "image/png", pages)
    assert answer.page == 1
    assert [p.text for p in answer.pieces] == ["First line", "Second line", "Third"]
    assert answer.pieces[0].bbox == (0.1, 0.05, 0.6, 0.07)
    for p in answer.pieces:
        validate_bbox(p.bbox)


def test_whitespace_lines_dropped_degenerate_boxes_unresolved():
    lines = (
        LocatedLine("   ", (100, 100, 600, 140), SPACE),
        LocatedLine("Flat", (100, 150, 600, 150), SPACE),
        LocatedLine("Good", (100, 160, 640, 200), SPACE),
    )
    (answer,) = LinesChunker().chunk(b"", "image/png", (page(lines),))
    assert [(p.text, p.bbox_reason) for p in answer.pieces] == [("Flat", "unresolved"), ("Good", None)]


def test_ocr_lines_in_two_clusters_make_two_paragraphs():  # T-L3
    lines = (
        LocatedLine("A scanned paragraph starts", (100, 100, 900, 140), SPACE),
        LocatedLine("and it continues here.", (100, 150, 700, 190), SPACE),
        LocatedLine("Another paragraph after a gap.", (100, 400, 880, 440), SPACE),
        LocatedLine("   ", (100, 500, 880, 540), SPACE),
    )
    (answer,) = LineParagraphsChunker().chunk(b"", "application/pdf", (page(lines),))
    assert [p.text for p in answer.pieces] == [
        "A scanned paragraph starts and it continues here.",
        "Another paragraph after a gap.",
    ]
    assert answer.pieces[0].bbox == (0.1, 0.05, 0.9, 0.095)
    assert answer.pieces[1].bbox == (0.1, 0.2, 0.88, 0.22)


def test_lines2_leaves_pages_without_lines():
    assert LineParagraphsChunker().chunk(b"", "image/png", (page(None),)) == ()


def test_lines_chunkers_are_registered():
    from ingest_pipeline.registry import ChunkerRegistry

    registry = ChunkerRegistry.discover()
    infos = {i.ref: i for i in registry.infos()}
    assert infos["lines@1"].default and not infos["lines@2"].default
    assert infos["pdf@1"].default and not infos["pdf@2"].default and not infos["pdf@3"].default
    assert infos["pdf@1"].media_types == ("application/pdf",)
