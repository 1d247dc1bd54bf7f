"""A chunk map partition draws, beside its first page, the pages its coverage check flagged,
and names the command that draws any other page (through Dagster, real lake and model)."""

from ingest_pipeline.assets.profiles import PAGE_PICTURE
from ingest_pipeline_tests.dagster_helpers import (
    fresh_pipeline,
    materializations,
    register,
    run_batch,
    temporary_instance,
)
from ingest_pipeline_tests.pdf_writer import PdfWriter

HEADER = "Northwind Traders quarterly harvest ledger confidential draft for the board"
SEASONS = ("spring", "summer", "autumn", "winter", "the dry months", "the rains")


def _headed_pdf() -> bytes:
    """Six pages, each a long running header (which pdf@4 leaves out) over one short line:
    every page's served words fall under the coverage floor."""
    w = PdfWriter()
    for season in SEASONS:
        page = w.page()
        page.text(72, 750, HEADER, 10)
        page.text(72, 500, f"Barley planted in {season}.", 10)
    return w.to_bytes()


def test_the_flagged_pages_are_drawn_and_the_others_one_command_away(data_dir):
    (data_dir / "sources" / "ledger.pdf").write_bytes(_headed_pdf())
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    keys = register(pipeline, instance)
    result = run_batch(pipeline, instance, keys)
    assert result.success
    (coverage,) = [
        e
        for e in result.get_asset_check_evaluations()
        if e.check_name == "page_text_covered" and e.asset_key.to_user_string() == "chunk_map_retrieval"
    ]
    assert not coverage.passed and coverage.metadata["count"].value == 6  # every page, as it should here
    (picture,) = [m[PAGE_PICTURE] for m in materializations(result)["chunk_map_retrieval"].values()]
    assert picture.startswith("ledger.pdf, page 1:")
    assert picture.count("](data:image/png;base64,") == 4  # at most four pictures a partition
    assert "ledger.pdf, page 2 (flagged by page_text_covered):" in picture
    assert picture.endswith(
        "Any other of its 6 pages: "
        "`ingest-pipeline show 'ledger.pdf' --page N --profile retrieval --out page.png`"
    )
