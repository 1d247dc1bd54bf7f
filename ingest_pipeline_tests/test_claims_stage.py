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
