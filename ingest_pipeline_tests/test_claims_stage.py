"""The claims stage as a plain function on a temporary store: which chunkers get asked."""

from __future__ import annotations

from ingest_pipeline import media_types as mt
from ingest_pipeline import stages
from ingest_pipeline.chunkers.base import BaseChunker
from ingest_pipeline.documents import collect
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.settings import load_settings
from ingest_pipeline.store import Store
from ingest_pipeline_tests.conftest import CORPUS, requires_corpus, write


class PdfOnly(BaseChunker):
    """Claims nothing and fails loudly whenever it is asked about a document."""

    id = "pdf_only"
    version = 1
    media_types = frozenset({mt.PDF})

    def chunk(self, content, media_type, pages):
        raise RuntimeError(f"asked about a {media_type} document")


class Anything(PdfOnly):
    id = "anything"
    media_types = None


def test_a_chunker_whose_media_types_exclude_the_document_gets_an_empty_claim_unasked(data_dir):
    write(data_dir / "sources" / "notes.md", "# Notes\n\nA short Markdown note.\n")
    settings = load_settings(data_dir)
    store = Store.at(settings.lake_root)
    (entry,) = collect(settings, [settings.source_root])
    store.save_inventory([entry])
    doc = entry.document_id
    stages.observe_source(settings, store, doc, "run")
    stages.read_document(settings, store, doc, "run")
    registry = ChunkerRegistry()
    for chunker in (PdfOnly(), Anything()):
        registry.register(chunker)

    skipped = stages.run_chunker(settings, store, PdfOnly(), registry.info(PdfOnly()), doc, "run")
    assert skipped.status == "new" and skipped.detail["pieces"] == 0 and "error" not in skipped.detail
    assert store.claim_meta("pdf_only_v1", doc)["error"] is None

    asked = stages.run_chunker(settings, store, Anything(), registry.info(Anything()), doc, "run")
    assert asked.status == "failed" and "asked about a text/markdown document" in asked.detail["error"]


@requires_corpus
def test_an_encrypted_pdf_is_chunked_with_the_password_the_stage_passes(data_dir):
    from ingest_pipeline.chunkers.pdf import PdfLinesChunker

    name = "pypdf-samples__libreoffice-writer-password.pdf"
    write(data_dir / "sources" / name, (CORPUS / "files" / "pdf" / name).read_bytes())
    (data_dir / "passwords.toml").write_text(f'"{name}" = "openpassword"\n')
    settings = load_settings(data_dir)
    store = Store.at(settings.lake_root)
    (entry,) = collect(settings, [settings.source_root])
    store.save_inventory([entry])
    doc = entry.document_id
    stages.observe_source(settings, store, doc, "run")
    stages.read_document(settings, store, doc, "run")
    chunker = PdfLinesChunker()
    outcome = stages.run_chunker(settings, store, chunker, ChunkerRegistry().info(chunker), doc, "run")
    assert outcome.status == "new" and outcome.detail["pieces"] > 0
    stored = store.lake.read("claims", "pdf_v1", doc).to_pylist()
    assert "openpassword" not in repr(stored) and "openpassword" not in repr(store.claim_meta("pdf_v1", doc))


@requires_corpus
def test_what_a_stage_keeps_in_memory_is_what_its_asset_would_read_back(data_dir):
    """The chunk map's checks and the claims' metadata are computed from what the stages
    hold (``Outcome.kept``) instead of reading back what they wrote: on a PDF with boxes and
    tables and on Markdown, the kept rows, pages and metadata give exactly the stored ones."""
    from ingest_pipeline.stages.chunk_map import chunk_map_findings
    from ingest_pipeline_tests.dagster_helpers import fresh_pipeline

    write(data_dir / "sources" / "report.pdf", (CORPUS / "files" / "pdf" / "docling__multi_page.pdf").read_bytes())
    write(data_dir / "sources" / "notes.md", "# Notes\n\nA short Markdown note.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    p = fresh_pipeline(data_dir)
    entries = collect(p.settings, [p.settings.source_root])
    p.store.save_inventory(entries)
    docs = [e.document_id for e in entries]
    for doc in docs:
        stages.observe_source(p.settings, p.store, doc, "run")
        stages.read_document(p.settings, p.store, doc, "run")
    for profile in p.settings.profiles:
        for chunker in p.registry.order_for(profile.chunkers):
            info = p.registry.info(chunker)
            for doc in docs:
                for _ in range(2):  # computed, then unchanged: both keep the stored metadata
                    outcome = stages.run_chunker(p.settings, p.store, chunker, info, doc, "run")
                    assert outcome.kept["meta"] == p.store.claim_meta(info.asset_name, doc), (info.ref, outcome.status)
        outcomes = [stages.build_chunk_map(p.store, p.registry, profile, p.embedder, doc, "run") for doc in docs]
        kept = {o.document: o.kept for o in outcomes}
        assert all(o.status == "new" and o.kept["rows"] for o in outcomes)
        from_memory = chunk_map_findings(p.store, profile.name, docs, p.embedder.max_tokens, kept)
        read_back = chunk_map_findings(p.store, profile.name, docs, p.embedder.max_tokens)
        assert from_memory == read_back, profile.name
