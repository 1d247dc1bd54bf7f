"""The claims stage as a plain function on a temporary store: which chunkers get asked."""

from __future__ import annotations

from ingest_pipeline import media_types as mt
from ingest_pipeline import stages
from ingest_pipeline.chunkers.base import BaseChunker
from ingest_pipeline.contract import ChunkingError
from ingest_pipeline.documents import collect
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.settings import load_settings
from ingest_pipeline.storage.store import Store
from ingest_pipeline_tests.chunker_doubles import RaisingChunker
from ingest_pipeline_tests.conftest import CORPUS, pdf_bytes, requires_corpus, write


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


class SaysNoToMarkdown(PdfOnly):
    """Gives its own fast answer: it never cuts Markdown."""

    id = "says_no"

    def disclaims(self, media_type):
        return media_type == mt.MARKDOWN


def _observed(data_dir, name: str, content: str | bytes):
    """(settings, store, document id) of one file written under the sources, observed."""
    write(data_dir / "sources" / name, content)
    settings = load_settings(data_dir)
    store = Store.at(settings.lake_root)
    (entry,) = collect(settings, [settings.source_root])
    store.save_inventory([entry])
    stages.observe_source(settings, store, entry.document_id, "run")
    return settings, store, entry.document_id


def _read_note(data_dir, name: str = "notes.md", text: str = "# Notes\n\nA short Markdown note.\n"):
    """(settings, store, document id) of a short note (Markdown unless named otherwise),
    observed and read."""
    settings, store, doc = _observed(data_dir, name, text)
    stages.read_document(settings, store, doc, "run")
    return settings, store, doc


def test_every_chunker_is_asked_whatever_its_media_types_unless_it_disclaims_itself(data_dir):
    """SPEC B33: media types advertise and gate nothing; the cheap path is the chunker's own
    answer (the built-ins give one for what lies outside their media types)."""
    from ingest_pipeline.chunkers.markdown.chunker import MarkdownChunker

    settings, store, doc = _read_note(data_dir)
    registry = ChunkerRegistry()
    for chunker in (PdfOnly(), Anything(), SaysNoToMarkdown()):
        registry.register(chunker)

    # A third-party chunker that advertises PDF only is still asked about Markdown.
    asked = stages.run_chunker(settings, store, PdfOnly(), registry.info(PdfOnly()), doc, "run")
    assert asked.status == "failed" and "asked about a text/markdown document" in asked.detail["error"]
    asked = stages.run_chunker(settings, store, Anything(), registry.info(Anything()), doc, "run")
    assert asked.status == "failed" and "asked about a text/markdown document" in asked.detail["error"]

    unasked = SaysNoToMarkdown()
    skipped = stages.run_chunker(settings, store, unasked, registry.info(unasked), doc, "run")
    assert skipped.status == "new" and skipped.detail["pieces"] == 0 and "error" not in skipped.detail
    assert store.claim_meta("says_no_v1", doc)["error"] is None
    assert MarkdownChunker().disclaims(mt.PDF) and not MarkdownChunker().disclaims(mt.MARKDOWN)


@requires_corpus
def test_an_encrypted_pdf_is_chunked_with_the_password_the_stage_passes(data_dir):
    from ingest_pipeline.chunkers.pdf.lines import PdfLinesChunker

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
    from ingest_pipeline.stages.chunk_checks import chunk_map_findings
    from ingest_pipeline_tests.dagster_helpers import fresh_pipeline

    write(
        data_dir / "sources" / "report.pdf",
        (CORPUS / "files" / "pdf" / "docling__multi_page.pdf").read_bytes(),
    )
    write(
        data_dir / "sources" / "notes.md",
        "# Notes\n\nA short Markdown note.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
    )
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
                    assert outcome.kept["meta"] == p.store.claim_meta(info.asset_name, doc), (
                        info.ref,
                        outcome.status,
                    )
        outcomes = [
            stages.build_chunk_map(p.store, p.registry, profile, p.embedder, doc, "run") for doc in docs
        ]
        kept = {o.document: o.kept for o in outcomes}
        assert all(o.status == "new" and o.kept["rows"] for o in outcomes)
        from_memory = chunk_map_findings(p.store, profile.name, docs, p.embedder.max_tokens, kept)
        read_back = chunk_map_findings(p.store, profile.name, docs, p.embedder.max_tokens)
        assert from_memory == read_back, profile.name


def _one_document_read(data_dir):
    """A fresh pipeline over the one file in ``data_dir/sources``, its source observed and its
    pages read: (pipeline parts, document id, served profile)."""
    from ingest_pipeline_tests.dagster_helpers import fresh_pipeline

    p = fresh_pipeline(data_dir)
    entries = collect(p.settings, [p.settings.source_root])
    p.store.save_inventory(entries)
    (doc,) = [e.document_id for e in entries]
    stages.observe_source(p.settings, p.store, doc, "run")
    stages.read_document(p.settings, p.store, doc, "run")
    return p, doc, next(pr for pr in p.settings.profiles if pr.name == p.settings.default_profile)


@requires_corpus
def test_a_chunk_map_reads_only_the_claims_that_win_and_tokenizes_each_text_once(data_dir):
    """Building a chunk map reads only the claims that win a page (first in the profile's
    order), each once, and tokenizes the document's embedding texts in one batch, with no
    call per piece; the map is the one the merge gives over every claim read whole as
    pieces, each piece cut to the model's limit on its own (as it was built before)."""
    from dataclasses import replace

    from ingest_pipeline.contract import PageChunks
    from ingest_pipeline.embedding.token_limits import split_to_limit
    from ingest_pipeline.stages.embedding_text import document_title
    from ingest_pipeline.stages.merge import Claim, merge_claims

    write(
        data_dir / "sources" / "report.pdf",
        (CORPUS / "files" / "pdf" / "docling__multi_page.pdf").read_bytes(),
    )
    p, doc, served = _one_document_read(data_dir)
    for chunker in p.registry.all():
        stages.run_chunker(p.settings, p.store, chunker, p.registry.info(chunker), doc, "run")
    order = [p.registry.info(c) for c in p.registry.order_for(served.chunkers)]

    read, calls = [], {"offsets": 0, "counts": 0}
    real_claim_table = p.store.claim_table

    def claim_table(asset, document):
        read.append(asset)
        return real_claim_table(asset, document)

    class Counting:
        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def token_offsets(self, text):
            calls["offsets"] += 1
            return self.inner.token_offsets(text)

        def count_tokens(self, texts):
            calls["counts"] += 1
            return self.inner.count_tokens(texts)

    p.store.claim_table = claim_table
    outcome = stages.build_chunk_map(
        p.store, p.registry, served, Counting(p.embedder), doc, "run", force=True
    )
    assert outcome.status == "new"
    rows = p.store.chunk_rows(served.name, doc)
    winners = {r["chunker"] for r in rows}
    assert len(order) > len(winners)  # some versions win nothing here: they are not read
    assert sorted(read) == sorted(i.asset_name for i in order if i.ref in winners)
    assert calls["offsets"] < len(rows) and calls["counts"] <= 2  # no call per piece

    # the same map from every claim read whole, each piece cut to the limit on its own
    p.store.claim_table = real_claim_table
    claims = []
    for info in order:
        meta, by_page = p.store.claim(info.asset_name, doc)
        claims.append(
            Claim(
                info.ref,
                meta["config_hash"],
                tuple(PageChunks(page=k, pieces=tuple(v)) for k, v in sorted(by_page.items())),
                meta.get("error"),
            )
        )
    assert served.document_context
    title = document_title(rows[0]["path"])
    pages, _ = stages.load_pages(p.store, doc)
    whole = merge_claims(
        doc,
        pages,
        claims,
        expand=lambda ps: [
            split_to_limit(
                replace(x, embed_text=f"{title}\n{x.embed_text or x.text}"),
                p.embedder.token_offsets,
                p.embedder.max_tokens,
            )
            for x in ps
        ],
    )
    assert [c.chunk_id for c in whole.chunks] == [r["chunk_id"] for r in rows]
    assert [c.piece.embed_text for c in whole.chunks] == [r["embed_text"] for r in rows]


@requires_corpus
def test_the_chunk_map_merged_as_tables_is_the_one_merged_piece_by_piece(data_dir):
    """For every profile, the chunk map's Arrow merge (stored rows taken as they are; only a
    piece over the limit made an object) gives the rows the piece-by-piece merge gives
    (``merge_claims`` with the Expander, then ``relink``): a PDF, and
    Markdown whose long sections are cut, so its chunk ids are numbered anew."""
    import json

    from ingest_pipeline.stages.claims import claim_metas
    from ingest_pipeline.stages.embedding_text import Expander
    from ingest_pipeline.stages.merge_stored import merge_claim_tables, merged_by_pieces

    # dense in tokens (digits and signs), so markdown@1's 1,200-character chunks exceed the model's 256
    section = " ".join(f"Valve V-{i}/a.{i % 7} reads {i}.{i % 9}-{i % 5}/b;" for i in range(120))
    markdown = "\n\n".join(f"# Part {k}\n\n{section}\n\n## Notes {k}\n\nShort note {k}." for k in range(3))
    cases = [
        ("manual.md", markdown.encode()),
        ("report.pdf", (CORPUS / "files" / "pdf" / "docling__multi_page.pdf").read_bytes()),
    ]
    renumbered = 0
    for name, content in cases:
        for old in (data_dir / "sources").glob("*"):
            old.unlink()
        write(data_dir / "sources" / name, content)
        p, doc, _ = _one_document_read(data_dir)
        for chunker in p.registry.all():
            stages.run_chunker(p.settings, p.store, chunker, p.registry.info(chunker), doc, "run")
        pages, _ = stages.load_pages(p.store, doc)
        source, _ = stages.load_source(p.store, doc)
        for profile in p.settings.profiles:
            order = [p.registry.info(c) for c in p.registry.order_for(profile.chunkers)]
            metas = claim_metas(p.store, order, doc)
            expand = Expander(profile, p.embedder, source["path"])
            as_tables = merge_claim_tables(p.store, order, metas, doc, pages, expand)
            by_pieces = merged_by_pieces(p.store, order, metas, doc, pages, expand)
            columns = [
                "page",
                "chunker",
                "config_hash",
                "text",
                "image",
                "bbox",
                "bbox_reason",
                "role",
                "layout",
                "header_path",
                "content_type",
                "embed_text",
                "meta",
            ]
            assert as_tables.table.num_rows > 0, (name, profile.name)
            assert as_tables.table.select(columns).to_pylist() == by_pieces.table.select(columns).to_pylist()
            assert (as_tables.dropped, as_tables.failed) == (by_pieces.dropped, by_pieces.failed)
            metas_of = [json.loads(m) for m in as_tables.table.column("meta").to_pylist() if m]
            renumbered += sum(
                1 for m in metas_of if "token_split" in m and str(m.get("chunk_id", "")).startswith("chk_")
            )
    assert renumbered  # the Markdown case did cut chunks that relink numbered anew


def test_the_served_embedding_texts_name_the_document_as_its_first_page_does(data_dir):
    """A file named by a ticker ("2022 Q3 ACME") whose cover sets the company's name large:
    every served chunk's embedding text starts with the file's title and that name, and the
    chunk's own text is left as it was; a file name that already says it is not repeated."""
    import json

    from ingest_pipeline.contract import ChunkPiece
    from ingest_pipeline.stages.embedding_text import with_named_title
    from ingest_pipeline_tests.pdf_writer import PdfWriter

    w = PdfWriter()
    cover = w.page()
    cover.text(72, 740, "FORM 10-Q", 18).text(72, 700, "Acme Widgets Corp.", 26)
    for i in range(5):
        cover.text(72, 640 - 16 * i, f"Net sales of the quarter were higher in segment {i}.", 10)
    w.page().text(72, 720, "Revenue by segment rose on higher volumes in every region.", 10)
    write(data_dir / "sources" / "2022 Q3 ACME.pdf", w.to_bytes())
    p, doc, served = _one_document_read(data_dir)
    for ref in p.registry.order_for(served.chunkers):
        stages.run_chunker(p.settings, p.store, ref, p.registry.info(ref), doc, "run")
    assert stages.build_chunk_map(p.store, p.registry, served, p.embedder, doc, "run").status == "new"
    rows = p.store.chunk_rows(served.name, doc)
    assert {r["page"] for r in rows} == {1, 2}
    for row in rows:
        assert row["embed_text"].startswith("2022 Q3 ACME (Acme Widgets Corp.)\n"), row["embed_text"]
        assert not row["text"].startswith("2022 Q3 ACME")

    (first,) = [r for r in rows if r["page"] == 1 and r["index"] == 0]
    assert json.loads(first["meta"])["document_title"] == "Acme Widgets Corp."

    # served: keyword search finds the second page's chunk by the name its text never says
    stages.embed_documents(p.store, p.embedder, served, [doc], "run")
    assert stages.index_document(p.store, p.index, served, doc, "run").status == "new"
    p.index.refresh_text_index(served.name)
    hits = p.index.search(served.name, "Acme Widgets", None, k=10, mode="text")
    assert {h["page"] for h in hits} == {1, 2} and all(
        "Acme" not in h["text"] for h in hits if h["page"] == 2
    )

    pieces = [
        ChunkPiece(text="Net sales", bbox_reason="no_geometry", meta={"document_title": "Acme Widgets Corp."})
    ]
    assert (
        with_named_title("acme widgets corp. annual report 2022", pieces)
        == "acme widgets corp. annual report 2022"
    )
    assert with_named_title("2022 Q3 ACME", pieces) == "2022 Q3 ACME (Acme Widgets Corp.)"
    assert with_named_title("2022 Q3 ACME", []) == "2022 Q3 ACME"


def _two_page_report() -> bytes:
    from ingest_pipeline_tests.pdf_writer import PdfWriter

    w = PdfWriter()
    cover = w.page()
    cover.text(72, 740, "Annual Report", 24)
    for i in range(6):
        cover.text(72, 690 - 16 * i, f"Operating income grew in region {i} on higher prices and volumes.", 10)
    second = w.page()
    second.text(72, 740, "Liquidity", 16)
    for i in range(4):
        second.text(
            72, 700 - 16 * i, f"Cash from operations covered capital spending in quarter {i + 1}.", 10
        )
    return w.to_bytes()


def test_a_claim_the_parse_worker_hands_back_is_the_claim_the_chunker_answered(data_dir):
    """The worker turns a chunker's answer into the claim's rows itself and sends back one
    Arrow table: the stored pieces are the chunker's own answer (asked here, in the test's
    process), the claim's content hash is the one its rows give, and the pieces a served
    version keeps for the model are the stored ones."""
    import pyarrow as pa

    from ingest_pipeline.contract import SourceBytes
    from ingest_pipeline.runtime.isolation import ParseWorker
    from ingest_pipeline.stages.claims import _claim_content
    from ingest_pipeline.storage import tables
    from ingest_pipeline.storage.store import piece_row

    write(data_dir / "sources" / "report.pdf", _two_page_report())
    p, doc, _served = _one_document_read(data_dir)
    pages = p.store.pages(doc)
    worker = ParseWorker(60.0, None)
    try:
        for ref in ("pdf@1", "pdf@4"):
            chunker = p.registry.get(ref)
            info = p.registry.info(chunker)
            outcome = stages.run_chunker(
                p.settings, p.store, chunker, info, doc, "run", worker, keep_pieces=True
            )
            assert outcome.status == "new" and outcome.detail["pieces"] > 0
            meta, by_page = p.store.claim(info.asset_name, doc)
            source = (data_dir / "sources" / "report.pdf").read_bytes()
            answer = chunker.chunk(SourceBytes(source, None), "application/pdf", pages)
            assert {a.page: list(a.pieces) for a in answer} == by_page, ref
            stored = [piece for page in sorted(by_page) for piece in by_page[page]]
            assert outcome.kept["pieces"] == stored, ref
            rows = [
                {"page": a.page, "piece": n, **piece_row(piece)}
                for a in answer
                for n, piece in enumerate(a.pieces)
            ]
            table = pa.Table.from_pylist(rows, schema=tables.CLAIMS)
            assert meta["content"] == _claim_content(
                table, sorted(by_page), None, info.ref, info.config_hash
            ), ref
            assert meta["claimed_pages"] == [1, 2] and meta["summary"]["pieces"] == len(rows), ref
    finally:
        worker.close()


def test_the_version_that_feeds_the_model_takes_the_shortest_documents_first(data_dir):
    from ingest_pipeline.assets.chunks import _shortest_first

    write(data_dir / "sources" / "a-long.pdf", pdf_bytes([["one"], ["two"], ["three"]]))
    write(data_dir / "sources" / "b-short.pdf", _two_page_report())
    write(data_dir / "sources" / "c-shortest.pdf", pdf_bytes([["only page"]]))
    settings = load_settings(data_dir)
    store = Store.at(settings.lake_root)
    entries = collect(settings, [settings.source_root])
    store.save_inventory(entries)
    by_name = {e.path.rsplit("/", 1)[-1]: e.document_id for e in entries}
    for doc in by_name.values():
        stages.observe_source(settings, store, doc, "run")
        stages.read_document(settings, store, doc, "run")
    keys = [by_name["a-long.pdf"], by_name["b-short.pdf"], by_name["c-shortest.pdf"]]
    assert _shortest_first(store, keys) == keys[::-1]


def test_the_served_rows_carry_the_vectors_the_model_gave_their_texts(data_dir):
    """The embeddings file and the LanceDB rows get each chunk's vector as an Arrow block
    (no Python list per row): every row's vector is the model's for its embedding text,
    the same in both, and an image chunk's row has none."""
    import numpy as np

    write(data_dir / "sources" / "report.pdf", _two_page_report())
    p, doc, served = _one_document_read(data_dir)
    for ref in p.registry.order_for(served.chunkers):
        stages.run_chunker(p.settings, p.store, ref, p.registry.info(ref), doc, "run")
    assert stages.build_chunk_map(p.store, p.registry, served, p.embedder, doc, "run").status == "new"
    (outcome,) = stages.embed_documents(p.store, p.embedder, served, [doc], "run")
    assert outcome.status == "new" and outcome.detail["images_without_vector"] == 0
    assert stages.index_document(p.store, p.index, served, doc, "run").status == "new"

    chunks = {r["chunk_id"]: r for r in p.store.chunk_rows(served.name, doc)}
    stored = p.store.embeddings(served.name, doc).to_pylist()
    assert sorted(r["chunk_id"] for r in stored) == sorted(chunks) and len(chunks) >= 2
    served_rows = p.index.open(served.name).to_arrow().to_pylist()
    assert sorted(r["chunk_id"] for r in served_rows) == sorted(chunks)
    by_id = {r["chunk_id"]: r["vector"] for r in served_rows}
    texts = [chunks[r["chunk_id"]]["embed_text"] or chunks[r["chunk_id"]]["text"] for r in stored]
    model = p.embedder.embed(texts)
    for row, expected in zip(stored, model):
        assert np.allclose(row["vector"], expected, atol=1e-6), row["chunk_id"]
        assert np.array_equal(
            np.asarray(by_id[row["chunk_id"]], np.float32), np.asarray(row["vector"], np.float32)
        )


def test_a_claims_content_hash_follows_its_pieces_and_not_its_stamp():
    """The content hash is what the chunk map's fingerprint takes from a claim: the same
    pieces under another run id or document give the same hash, a change to any piece
    column (text, image, box, role, meta, header path) or to the claimed pages another."""
    import pyarrow as pa

    from ingest_pipeline.contract import ChunkPiece
    from ingest_pipeline.stages.claims import _claim_content
    from ingest_pipeline.storage import tables
    from ingest_pipeline.storage.store import piece_row

    pieces = [
        ChunkPiece(
            text="Revenue rose 4%.", bbox=(0.1, 0.1, 0.5, 0.2), header_path=("Results",), meta={"lines": 1}
        ),
        ChunkPiece(text=None, image=b"\x89PNG fake", bbox_reason="no_geometry", content_type="image"),
    ]

    def content(stamp, changed=None, pages=(1,)):
        rows = [
            {**stamp, "page": 1, "piece": n, **piece_row(piece), **((changed or {}) if n == 0 else {})}
            for n, piece in enumerate(pieces)
        ]
        return _claim_content(
            pa.Table.from_pylist(rows, schema=tables.CLAIMS), list(pages), None, "pdf@4", "cfg"
        )

    first = content({"run_id": "a", "document_id": "d1"})
    assert first == content({"run_id": "b", "document_id": "d2", "source_sha256": "f" * 64})
    changes = [
        {"text": "Revenue rose 5%."},
        {"image": b"other"},
        {"bbox": {"x0": 0.1, "y0": 0.1, "x1": 0.5, "y1": 0.3}},
        {"role": "heading"},
        {"meta": '{"lines": 2}'},
        {"header_path": ["Results", "Q4"]},
    ]
    hashes = {content({"run_id": "a"}, change) for change in changes} | {
        content({"run_id": "a"}, pages=(1, 2))
    }
    assert first not in hashes and len(hashes) == len(changes) + 1
    empty = tables.CLAIMS.empty_table()
    assert _claim_content(empty, [], None, "pdf@4", "cfg") == _claim_content(
        empty, [], None, "pdf@4", "other"
    )


class CannotSplit(RaisingChunker):
    """Says, the way the contract lets it, that a document cannot be split."""

    id = "cannot_split"
    version = 1
    error_type = ChunkingError
    message = "its one table has no header row"


def test_a_chunking_error_is_this_chunkers_failure_on_this_document_with_its_reason(data_dir):
    """SPEC F09: ChunkingError means the document could not be split, a per-document
    failure; the document's pages go on to the next chunker."""
    settings, store, doc = _read_note(data_dir)
    registry = ChunkerRegistry()
    registry.register(CannotSplit())
    outcome = stages.run_chunker(settings, store, CannotSplit(), registry.info(CannotSplit()), doc, "run")
    assert outcome.status == "failed"
    assert outcome.detail["error"] == "could not be split: its one table has no header row"
    (row,) = [e for e in store.document_errors(doc) if e["stage"].startswith("chunks/")]
    assert row["reason"] == "could not be split: its one table has no header row"
    assert store.claim_meta("cannot_split_v1", doc)["claimed_pages"] == []  # its pages stay free
    asked = stages.run_chunker(settings, store, PdfOnly(), registry.info(PdfOnly()), doc, "run")
    assert asked.detail["error"].startswith("RuntimeError: ")  # a fault reads as one


class AnswersEveryPageEmpty(BaseChunker):
    """Answers every page with zero pieces; with ``left_out`` set it says it left the text
    out on purpose."""

    id = "empty_answers"
    version = 1
    left_out: tuple[str, ...] = ()

    def chunk(self, content, media_type, pages):
        from ingest_pipeline.contract import PageChunks

        return tuple(PageChunks(page=p.page, pieces=(), left_out=self.left_out) for p in pages)


class LeavesEveryPageOut(AnswersEveryPageEmpty):
    id = "leaves_out"
    left_out = ("every line of it, on purpose",)


def _merged_behind(data_dir, first):
    """A text document cut by ``first`` and then page@1, merged from the stored claims."""
    from ingest_pipeline.chunkers.page import PageChunker
    from ingest_pipeline.stages.claims import claim_metas, load_winning_claims
    from ingest_pipeline.stages.merge import merge_claims

    settings, store, doc = _read_note(data_dir, "notes.txt", "A short note about the orchard.\n")
    registry = ChunkerRegistry()
    order = [first, PageChunker()]
    for chunker in order:
        registry.register(chunker)
        stages.run_chunker(settings, store, chunker, registry.info(chunker), doc, "run")
    infos = [registry.info(c) for c in order]
    claimed = store.claim_meta(infos[0].asset_name, doc)["claimed_pages"]
    pages = stages.load_pages(store, doc)[0]
    claims = load_winning_claims(store, infos, claim_metas(store, infos, doc), doc, pages)
    return claimed, merge_claims(doc, pages, claims)


def test_a_claim_of_zero_pieces_wins_no_page_so_page_v1_still_cuts_it(data_dir):
    """SPEC B36: with page@1 installed every readable, non-blank page gets a chunk, even
    behind a chunker that answered the page with nothing."""
    claimed, merged = _merged_behind(data_dir, AnswersEveryPageEmpty())
    assert claimed == [] and merged.page_owner == {1: "page@1"}
    assert [c.piece.text.strip() for c in merged.chunks] == ["A short note about the orchard."]


def test_a_chunker_that_says_what_it_left_out_keeps_the_page_empty(data_dir):
    claimed, merged = _merged_behind(data_dir, LeavesEveryPageOut())
    assert claimed == [1] and merged.page_owner == {1: "leaves_out@1"} and not merged.chunks


class RewritesTheReaderText(BaseChunker):
    """Tries to replace the reader's text of the page it is handed."""

    id = "rewriter"
    version = 1

    def chunk(self, content, media_type, pages):
        pages[0].text = "text the reader never read"
        return ()


def test_a_chunker_cannot_replace_the_readers_text(data_dir):
    """SPEC A06: pages keep the reader's text whatever the chunkers do; the attempt is that
    chunker's failure on that document, and the pages rows are untouched."""
    settings, store, doc = _read_note(data_dir, "notes.txt", "What the reader read.\n")
    registry = ChunkerRegistry()
    rewriter = RewritesTheReaderText()
    registry.register(rewriter)
    outcome = stages.run_chunker(settings, store, rewriter, registry.info(rewriter), doc, "run")
    assert outcome.status == "failed" and "FrozenInstanceError" in outcome.detail["error"]
    assert [p.text for p in stages.load_pages(store, doc)[0]] == ["What the reader read.\n"]


class NotesWhatItIsHanded(BaseChunker):
    """Answers nothing, and keeps the verdicts of the pages it is handed."""

    id = "notes_pages"
    version = 1
    seen: list[tuple[int, str, str | None]] = []

    def chunk(self, content, media_type, pages):
        type(self).seen = [(p.page, p.status, p.reason) for p in pages]
        return ()


def test_bytes_no_reader_opens_get_a_failed_verdict_page_that_the_chunkers_are_handed(data_dir):
    """SPEC A13: readers run first and give a verdict even on bytes they cannot open; that
    page reaches the chunkers. The document still fails at pages, with the reason, and the
    chunkers' outcome says it failed upstream."""
    settings, store, doc = _observed(
        data_dir, "cut.pdf", pdf_bytes([["A page that will be cut short"]])[:300]
    )
    read = stages.guarded(store, "pages", doc, "run", stages.read_document, settings, store, doc, "run")
    assert read.status == "failed" and "PDFium cannot open it" in read.detail["reason"]
    (verdict,) = stages.load_pages(store, doc)[0]
    assert (verdict.page, verdict.status, verdict.reader) == (1, "failed", "pdfium_text@1")
    registry = ChunkerRegistry()
    chunker = NotesWhatItIsHanded()
    registry.register(chunker)
    outcome = stages.run_chunker(settings, store, chunker, registry.info(chunker), doc, "run")
    assert NotesWhatItIsHanded.seen == [(1, "failed", verdict.reason)]
    assert verdict.reason.startswith("cannot be opened: PDFium cannot open it")
    assert [e["stage"] for e in outcome.detail["failed_upstream"]] == ["pages"]


def test_a_pieces_layout_reaches_its_chunk_untouched(data_dir):
    """SPEC B11: a table piece's layout (role and cell grid) is copied to its chunk as the
    chunker stated it, byte for byte, in the served profile's chunk map."""
    write(data_dir / "sources" / "prices.csv", "product,unit,price\nbasil,packet,2.40\ntomato,tray,18.50\n")
    p, doc, served = _one_document_read(data_dir)
    for chunker in p.registry.order_for(served.chunkers):
        stages.run_chunker(p.settings, p.store, chunker, p.registry.info(chunker), doc, "run")
    stages.build_chunk_map(p.store, p.registry, served, p.embedder, doc, "run")
    claimed = p.store.claim_table("delimited_v1", doc).to_pylist()
    chunks = [r for r in p.store.chunk_rows(served.name, doc) if r["chunker"] == "delimited@1"]
    assert claimed and [r["text"] for r in chunks] == [r["text"] for r in claimed]
    assert any('"table"' in (r["layout"] or "") for r in claimed)
    assert [r["layout"] for r in chunks] == [r["layout"] for r in claimed]
