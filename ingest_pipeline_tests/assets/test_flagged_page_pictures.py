"""The coverage check of a chunk map fails on words really lost, not on lines a chunker left
out on purpose; the partition draws the pages it flagged beside its first page and names the
command that draws any other; each check result belongs to the document it judged, so a
later run of another document does not hide it; a slide's picture shows its text and its
pictures; a chunker version's PDF partition draws its pieces on its first page and on the
pages its own checks flagged (through Dagster, real lake and model)."""

from dagster import AssetCheckKey, AssetKey

from ingest_pipeline.assets.chunks import PIECES_PICTURE
from ingest_pipeline.assets.profiles import PAGE_PICTURE
from ingest_pipeline_tests.chunker_doubles import install_distribution
from ingest_pipeline_tests.dagster_helpers import (
    fresh_pipeline,
    register,
    run_batch,
    stories,
    temporary_instance,
)
from ingest_pipeline_tests.pdf_writer import PdfWriter

HEADER = "Northwind Traders quarterly harvest ledger confidential draft for the board"
SEASONS = ("spring", "summer", "autumn", "winter", "the dry months", "the rains")

# A third-party chunker that keeps only the first three words of each PDF page: it loses
# text, and says nothing about it.
CLIPPED_SOURCE = """
from ingest_pipeline.chunkers.base import BaseChunker
from ingest_pipeline.contract import ChunkPiece, PageChunks


class ClippedChunker(BaseChunker):
    id = "clipped"
    version = 1
    summary = "the first three words of a PDF page"

    def chunk(self, content, media_type, pages):
        if media_type != "application/pdf":
            return ()
        return tuple(
            PageChunks(page=p.page, pieces=(
                ChunkPiece(text=" ".join(p.text.split()[:3]), bbox=(0.1, 0.05, 0.9, 0.1)),))
            for p in pages if p.status == "read" and p.text.strip())
"""


# A third-party chunker whose own check fails on the fourth page, naming it.
CHECKED_SOURCE = """
from ingest_pipeline.chunkers.base import BaseChunker
from ingest_pipeline.contract import CheckOutcome, ChunkPiece, PageChunks


class CheckedChunker(BaseChunker):
    id = "checked"
    version = 1
    summary = "a PDF page's text as one piece, its fourth page judged too short"
    check_names = ("long_enough",)

    def chunk(self, content, media_type, pages):
        if media_type != "application/pdf":
            return ()
        return tuple(
            PageChunks(page=p.page, pieces=(ChunkPiece(text=p.text, bbox=(0.1, 0.05, 0.9, 0.4)),))
            for p in pages if p.status == "read" and p.text.strip())

    def check(self, content, media_type, pages, answer):
        return (CheckOutcome(name="long_enough", passed=False, description="pages long enough",
                             metadata={"short": [{"page": 4, "words": 3}]}),)
"""


def _headed_pdf() -> bytes:
    """Six pages, each a long running header (which pdf@4 leaves out, and says so) over one
    short line."""
    w = PdfWriter()
    for season in SEASONS:
        page = w.page()
        page.text(72, 750, HEADER, 10)
        page.text(72, 500, f"Barley planted in {season}.", 10)
    return w.to_bytes()


def test_lost_words_flag_pages_which_are_drawn_and_left_out_lines_do_not(data_dir, tmp_path, monkeypatch):
    site = install_distribution(
        tmp_path / "site", "acme_clipped", CLIPPED_SOURCE, {"clipped": "acme_clipped:ClippedChunker"}
    )
    monkeypatch.syspath_prepend(str(site))
    (data_dir / "sources" / "ledger.pdf").write_bytes(_headed_pdf())
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    result = run_batch(pipeline, instance, register(pipeline, instance))
    assert result.success
    coverage = {
        e.asset_key.to_user_string(): e
        for e in result.get_asset_check_evaluations()
        if e.check_name == "page_text_covered"
    }
    (ledger,) = register(pipeline, instance)
    assert {e.partition for e in coverage.values()} == {ledger}  # each result names its document
    # pdf@4 left the header out on purpose and said so: nothing was lost
    assert coverage["chunk_map_retrieval"].passed
    # the clipped chunker lost all but three words of every page: each page is flagged, with
    # its missing words
    lossy = coverage["chunk_map_default"]
    assert not lossy.passed and lossy.metadata["count"].value == 6
    table = lossy.metadata["pages_below_floor"].value
    assert "harvest ledger confidential" in table and "barley planted" in table
    meta = stories(result)
    (picture,) = [m[PAGE_PICTURE] for m in meta["chunk_map_default"].values()]
    assert picture.startswith("ledger.pdf, page 1:")
    assert picture.count("](data:image/png;base64,") == 4  # at most four pictures a partition
    assert "ledger.pdf, page 2 (flagged by page_text_covered):" in picture
    assert picture.endswith(
        "Any other of its 6 pages: "
        "`ingest-pipeline show 'ledger.pdf' --page N --profile default --out page.png`"
    )
    (served,) = [m[PAGE_PICTURE] for m in meta["chunk_map_retrieval"].values()]
    assert served.count("](data:image/png;base64,") == 1  # nothing flagged: its first page only


def test_a_later_run_of_another_document_keeps_the_first_documents_failed_check(
    data_dir, tmp_path, monkeypatch
):
    site = install_distribution(
        tmp_path / "site", "acme_clipped", CLIPPED_SOURCE, {"clipped": "acme_clipped:ClippedChunker"}
    )
    monkeypatch.syspath_prepend(str(site))
    sources = data_dir / "sources"
    (sources / "ledger.pdf").write_bytes(_headed_pdf())
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    (ledger,) = register(pipeline, instance)
    assert run_batch(pipeline, instance, [ledger]).success
    (sources / "notes.txt").write_text("Barley was planted early this year.\n", encoding="utf-8")
    later = [k for k in register(pipeline, instance) if k != ledger]
    second = run_batch(pipeline, instance, later)
    assert second.success
    assert [(e.partition, e.passed) for e in second.get_asset_check_evaluations()
            if e.check_name == "page_text_covered" and e.asset_key.to_user_string() == "chunk_map_default"
            ] == [(later[0], True)]  # fmt: skip
    key = AssetCheckKey(AssetKey("chunk_map_default"), "page_text_covered")
    latest = {
        info.partition_key: info.latest_execution_status.value
        for info in instance.event_log_storage.get_asset_check_partition_info([key])
    }
    assert latest == {
        ledger: "FAILED",
        later[0]: "SUCCEEDED",
    }
    history = instance.event_log_storage.get_asset_check_execution_history(key, limit=5)
    (first,) = [r.event.asset_check_evaluation for r in history if r.partition == ledger]
    table = first.metadata["pages_below_floor"].value
    assert "harvest ledger confidential" in table  # the failing pages, as a table, on its own result


def test_a_slides_picture_shows_its_text_and_its_picture(data_dir):
    import base64
    import io
    import re

    from PIL import Image
    from pptx import Presentation
    from pptx.util import Inches, Pt

    from ingest_pipeline_tests.office_fixtures import png_bytes, save_pptx

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])  # blank
    box = slide.shapes.add_textbox(Inches(0.5), Inches(0.5), Inches(5), Inches(2))
    box.text_frame.text = "Barley yields rose in every northern field this season"
    box.text_frame.paragraphs[0].runs[0].font.size = Pt(28)
    slide.shapes.add_picture(io.BytesIO(png_bytes((200, 30, 30), (120, 90))), Inches(6), Inches(4), Inches(3))
    (data_dir / "sources" / "harvest.pptx").write_bytes(save_pptx(deck))
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    result = run_batch(pipeline, instance, register(pipeline, instance))
    assert result.success
    meta = stories(result)
    (picture,) = [m[PAGE_PICTURE] for m in meta["chunk_map_retrieval"].values()]
    png = base64.b64decode(re.search(r"data:image/png;base64,([A-Za-z0-9+/=]+)", picture).group(1))
    image = Image.open(io.BytesIO(png)).convert("RGB")
    pixels = list(image.getdata())
    reds = sum(p[0] > 150 and p[1] < 90 and p[2] < 90 for p in pixels)
    ink = sum(max(p) < 120 for p in pixels)
    assert reds > 0.05 * len(pixels)  # the slide's picture, drawn where it sits
    assert ink > 200  # the slide's text, written in its box (not an empty outline on white)


def test_a_chunker_version_s_partition_draws_its_pieces_and_the_pages_its_checks_flagged(
    data_dir, tmp_path, monkeypatch
):
    site = install_distribution(
        tmp_path / "site", "acme_checked", CHECKED_SOURCE, {"checked": "acme_checked:CheckedChunker"}
    )
    monkeypatch.syspath_prepend(str(site))
    (data_dir / "sources" / "ledger.pdf").write_bytes(_headed_pdf())
    (data_dir / "sources" / "notes.txt").write_text("Barley was planted early this year.\n", encoding="utf-8")
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    result = run_batch(pipeline, instance, register(pipeline, instance))
    assert result.success
    meta = stories(result)
    ledger = next(k for k in meta["chunks/checked_v1"] if k.startswith("ledger"))
    picture = meta["chunks/checked_v1"][ledger][PIECES_PICTURE]
    assert picture.startswith("ledger.pdf, page 1:") and picture.count("](data:image/png;base64,") == 2
    assert "ledger.pdf, page 4 (flagged by checked@1's checks):" in picture
    assert picture.endswith(
        "Any other of its 6 pages: "
        "`ingest-pipeline show 'ledger.pdf' --page N --chunker checked@1 --out page.png`"
    )
    (served,) = [m[PIECES_PICTURE] for k, m in meta["chunks/pdf_v4"].items() if k.startswith("ledger")]
    assert served.count("](data:image/png;base64,") == 1 and "--chunker pdf@4" in served  # no check failed
    notes = next(m for k, m in meta["chunks/lines_v1"].items() if k.startswith("notes"))
    assert PIECES_PICTURE not in notes  # pictures are drawn for PDFs only
