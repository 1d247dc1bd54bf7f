"""Profiles through Dagster: a named opt-in version leads, the default order stays behind."""

from ingest_pipeline.settings import load_settings
from ingest_pipeline.storage.catalog import query
from ingest_pipeline_tests.conftest import write
from ingest_pipeline_tests.dagster_helpers import (
    fresh_pipeline,
    register,
    run_batch,
    stories,
    temporary_instance,
    total,
)
from ingest_pipeline_tests.pdf_writer import PdfWriter, gray_image


def layout_pdf() -> bytes:
    w = PdfWriter()
    page = w.page()
    page.text(72, 700, "The first paragraph has two lines of text")
    page.text(72, 686, "and this is its second line.")
    page.text(72, 650, "The second paragraph stands after a blank gap.")
    scan = w.page()  # an image and no text layer: a scan that no reader reads here
    scan.image(72, 300, 300, 300, 60, 60, gray_image(60, 60, lambda x, y: (x // 6 + y // 6) % 2 == 0))
    return w.to_bytes()


def test_named_pdf2_cuts_the_readable_page_and_pdf1_still_renders_the_scan(data_dir, monkeypatch):
    monkeypatch.setenv("INGEST_OCR", "0")  # leave the scanned page unread, so it must be rendered
    write(data_dir / "ingest_pipeline.toml", '[profiles.layout]\nchunkers = ["pdf@2"]\nindexed = true\n')
    write(data_dir / "sources" / "layout.pdf", layout_pdf())
    assert [p.name for p in load_settings(data_dir).profiles] == ["default", "retrieval", "layout"]
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    result = run_batch(pipeline, instance, register(pipeline, instance))
    assert result.success
    rows = query(
        pipeline.lake,
        "select profile, page, chunker, text, image is not null as is_image "
        'from chunks order by profile, page, "index"',
    ).to_pylist()
    layout = [(r["page"], r["chunker"], r["is_image"]) for r in rows if r["profile"] == "layout"]
    assert layout == [(1, "pdf@2", False), (1, "pdf@2", False), (2, "pdf@1", True)]
    default = [r for r in rows if r["profile"] == "default"]
    assert {(r["page"], r["chunker"]) for r in default} == {(1, "pdf@1"), (2, "pdf@1")}
    assert sum(1 for r in default if r["page"] == 1) == 3  # one chunk per line
    assert total(result, "embeddings_layout", "images_without_vector") == 1
    keys = {k for k in stories(result)}
    assert {"chunks/pdf_v2", "chunk_map_layout", "lancedb_layout"} <= keys


def test_only_indexed_profiles_get_embeddings_lancedb_and_search(data_dir, capsys):
    from ingest_pipeline.commands.cli import main
    from ingest_pipeline.definitions import build_definitions

    write(
        data_dir / "ingest_pipeline.toml",
        '[profiles.layout]\nchunkers = ["pdf@2"]\n[profiles.wide]\nchunkers = ["pdf@3"]\nindexed = true\n',
    )
    settings = load_settings(data_dir)
    assert [p.name for p in settings.indexed_profiles] == ["retrieval", "wide"]
    keys = {
        k.to_user_string() for k in build_definitions(settings).resolve_asset_graph().get_all_asset_keys()
    }
    for profile in ("default", "layout"):
        assert f"chunk_map_{profile}" in keys
        assert not {f"embeddings_{profile}", f"lancedb_{profile}", f"retrieval_eval_{profile}"} & keys
    for profile in ("retrieval", "wide"):
        assert {f"chunk_map_{profile}", f"embeddings_{profile}", f"lancedb_{profile}"} <= keys
    assert main(["--data", str(data_dir), "search", "tomato", "--profile", "layout"]) == 2
    assert "profile 'layout' is not indexed" in capsys.readouterr().err


def test_building_the_graph_reads_no_document_and_writes_nothing(sample_sources, data_dir):
    """SPEC E01: defining the assets only binds them; work happens when a partition is
    materialized. The storage root is as it was, file for file."""

    def listing():
        return sorted(
            (str(p.relative_to(data_dir)), p.stat().st_mtime_ns) for p in data_dir.rglob("*") if p.is_file()
        )

    from ingest_pipeline.definitions import build_definitions

    before = listing()
    defs = build_definitions(load_settings(str(data_dir)))
    assert defs.resolve_job_def("ingest_documents") is not None
    assert listing() == before and before
