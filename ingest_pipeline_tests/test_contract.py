import pytest

from ingest_pipeline.contract import (
    ChunkPiece,
    ContractError,
    Layout,
    LocatedLine,
    PageChunks,
    PageOutput,
    TableCell,
    TableLayout,
    normalize_box,
    validate_bbox,
)


def test_validate_bbox_accepts_normalized_boxes_and_returns_floats():
    assert validate_bbox([0, 0.25, 1, 0.5]) == (0.0, 0.25, 1.0, 0.5)


@pytest.mark.parametrize(
    "box",
    [
        (0.5, 0.1, 0.4, 0.2),  # x0 > x1
        (0.1, 0.2, 0.3, 0.2),  # zero height
        (-0.01, 0, 0.5, 0.5),
        (0, 0, 1.01, 0.5),
        (0, 0, float("nan"), 1),
        (0, 0, 1),
        "abcd",
    ],
)
def test_validate_bbox_refuses_bad_boxes(box):
    with pytest.raises(ContractError):
        validate_bbox(box)


def test_piece_needs_exactly_one_of_text_or_image():  # T-B1
    with pytest.raises(ContractError):
        ChunkPiece(text="a", image=b"\x89PNG", bbox_reason="no_geometry")
    with pytest.raises(ContractError):
        ChunkPiece(bbox_reason="no_geometry")
    with pytest.raises(ContractError):
        ChunkPiece(text="", image=b"", bbox_reason="no_geometry")
    assert ChunkPiece(image=b"\x89PNG", bbox=(0, 0, 1, 1)).is_image


def test_piece_needs_a_bbox_xor_a_known_reason():  # T-B1
    with pytest.raises(ContractError):
        ChunkPiece(text="a")
    with pytest.raises(ContractError):
        ChunkPiece(text="a", bbox=(0, 0, 1, 1), bbox_reason="hidden")
    with pytest.raises(ContractError):
        ChunkPiece(text="a", bbox_reason="offscreen")
    with pytest.raises(ContractError):
        ChunkPiece(text="a", bbox=(0, 0, 2, 1))
    for reason in ("no_geometry", "hidden", "unresolved"):
        assert ChunkPiece(text="a", bbox_reason=reason).bbox is None


def test_page_output_statuses_are_consistent():
    assert PageOutput(page=1, status="blank", reader="r@1", text="").readable
    with pytest.raises(ContractError):
        PageOutput(page=0, status="read", reader="r@1", text="x")
    with pytest.raises(ContractError):
        PageOutput(page=1, status="failed", reader="r@1")  # a failure needs a reason
    with pytest.raises(ContractError):
        PageOutput(page=1, status="read", reader="r@1", text="   ")
    with pytest.raises(ContractError):
        PageOutput(page=1, status="done", reader="r@1", text="x")


def test_exported_page_has_no_lines():  # T-N2
    line = LocatedLine("hello", (10, 10, 50, 20), space=(100, 100))
    page = PageOutput(page=1, status="read", reader="ocr@1", text="hello", lines=(line,))
    row = page.to_row()
    assert "lines" not in row
    assert row["text"] == "hello" and row["page"] == 1


def test_located_line_normalizes_by_its_own_space():
    line = LocatedLine("x", (50, 25, 150, 75), space=(200, 100))
    assert line.bbox() == (0.25, 0.25, 0.75, 0.75)
    assert LocatedLine("x", (10, 10, 10, 20), space=(100, 100)).bbox() is None
    assert normalize_box((-5, -5, 50, 50), 100, 100) == (0.0, 0.0, 0.5, 0.5)


def test_layout_round_trips_through_json():
    layout = Layout(
        role="table",
        table=TableLayout(
            rows=2,
            cols=2,
            header_rows=1,
            cells=(
                TableCell(0, 0, "Item", header=True, col_span=2, bbox=(0.1, 0.1, 0.9, 0.2)),
                TableCell(1, 0, "Widget"),
                TableCell(1, 1, "100.00"),
            ),
        ),
    )
    assert Layout.from_json(layout.to_json()) == layout


def test_image_piece_cannot_carry_a_layout():
    with pytest.raises(ContractError):
        ChunkPiece(image=b"x", bbox_reason="no_geometry", layout=Layout(role="figure"))


def test_page_chunks_are_numbered_from_one():
    with pytest.raises(ContractError):
        PageChunks(page=0, pieces=())
    assert PageChunks(page=2, pieces=[ChunkPiece(text="a", bbox_reason="no_geometry")]).pieces[0].text == "a"
