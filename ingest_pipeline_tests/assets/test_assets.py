"""The asset graph through Dagster: real instance on a temporary DAGSTER_HOME, real lake,
LanceDB, DuckDB and the real model."""

import subprocess
import sys
from pathlib import Path

from dagster import AssetKey

from ingest_pipeline.assets.profiles import PAGE_PICTURE
from ingest_pipeline.definitions import build_definitions
from ingest_pipeline.instance.run_tags import FAILED_DOCUMENTS_TAG, FAILED_IN_TAG
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.settings import load_settings
from ingest_pipeline.storage.catalog import query
from ingest_pipeline_tests.chunker_doubles import install_distribution
from ingest_pipeline_tests.conftest import write
from ingest_pipeline_tests.dagster_helpers import (  # noqa: I001
    fresh_pipeline,
    materializations,
    register,
    run_batch,
    statuses,
    stories,
    temporary_instance,
    total,
)

SIZED_SOURCE = """
from ingest_pipeline.chunkers.base import BaseChunker, ChunkerConfig
from ingest_pipeline.contract import ChunkPiece, PageChunks


class SizedConfig(ChunkerConfig):
    size: int = 40


class SizedChunker(BaseChunker):
    id = "sized"
    version = 1
    summary = "slices of plain text"
    Config = SizedConfig

    def chunk(self, content, media_type, pages):
        if media_type != "text/plain":
            return ()
        return tuple(PageChunks(page=p.page, pieces=tuple(
            ChunkPiece(text=p.text[i:i + self.config.size], bbox_reason="no_geometry")
            for i in range(0, len(p.text), self.config.size))) for p in pages if p.status == "read")
"""


def test_graph_has_every_node_and_one_chunk_asset_per_installed_version(data_dir):
    settings = load_settings(data_dir)
    defs = build_definitions(settings)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {
        "sources",
        "pages",
        "chunk_map_default",
        "chunk_map_retrieval",
        "embeddings_retrieval",
        "lancedb_retrieval",
        "catalog",
    } <= keys
    assert not {"embeddings_default", "lancedb_default"} & keys  # default is not indexed
    last_parts = [k.split("/")[-1] for k in keys]
    assert len(last_parts) == len(set(last_parts))  # the UI shows the last part: no two alike
    registry = ChunkerRegistry.discover()
    for info in registry.infos():
        assert f"chunks/{info.asset_name}" in keys
        spec = defs.resolve_assets_def(AssetKey(["chunks", info.asset_name]))
        assert (
            spec.code_versions_by_key[AssetKey(["chunks", info.asset_name])]
            == f"{info.version}:{info.config_hash}"
        )
    assert defs.resolve_sensor_def("source_files_sensor") is not None


def test_a_batch_run_chunks_embeds_and_indexes_and_a_bad_file_costs_only_itself(data_dir, sample_sources):
    write(sample_sources / "broken.pdf", b"%PDF-1.7\n" + b"\x00garbage" * 50)
    write(sample_sources / "empty.pdf", b"")
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    keys = register(pipeline, instance)
    assert len(keys) == 6
    result = run_batch(pipeline, instance, keys)
    assert result.success  # T-E3: one run for six partitions, failures recorded per document
    assert len(materializations(result)["sources"]) == 6  # one materialization per partition
    meta = stories(result)
    assert len(meta["sources"]) == 6  # and each partition's own story
    page_status = statuses(result, "pages")
    assert sorted(k.split("-")[0] for k, v in page_status.items() if v == "FAILED") == ["broken", "empty"]
    broken = next(m for k, m in meta["pages"].items() if k.startswith("broken"))
    assert broken["status"].startswith("FAILED in pages: ")
    # The run stays a success (one status for every partition) and counts them on its tags.
    tags = instance.get_run_by_id(result.run_id).tags
    assert tags[FAILED_DOCUMENTS_TAG] == "2" and tags[FAILED_IN_TAG].split(", ")[0] == "pages", tags
    # ... and each asset from pages on fails its document_processed check on those two
    # partitions only, naming the stage that failed and why.
    processed: dict[str, dict[str, object]] = {}
    for e in result.get_asset_check_evaluations():
        if e.check_name == "document_processed":
            processed.setdefault(e.asset_key.to_user_string(), {})[e.partition] = e
    assert set(processed) == set(meta) - {"catalog"}
    assert all(e.passed for e in processed["sources"].values()) and len(processed["sources"]) == 6
    failed = {k for k in keys if k.split("-")[0] in ("broken", "empty")}
    for asset_key, by_partition in processed.items():
        if asset_key == "sources":
            continue
        assert {k for k, e in by_partition.items() if not e.passed} == failed, asset_key
        reasons = by_partition[next(k for k in failed if k.startswith("broken"))].metadata["failures"].value
        assert "| pages |" in reasons and "PDFium" in reasons, (asset_key, reasons)
    # and the partitions downstream say so first, not "skipped"
    for asset_key in ("chunks/pdf_v4", "chunk_map_retrieval", "embeddings_retrieval", "lancedb_retrieval"):
        broken_status = next(m for k, m in meta[asset_key].items() if k.startswith("broken"))["status"]
        assert broken_status.startswith("FAILED upstream, in pages: PDFium"), (asset_key, broken_status)
    # Each document's record, on its own partition of pages: what it is, as read from it.
    handbook_pages = next(m for k, m in meta["pages"].items() if k.startswith("greenhouse-handbook"))
    report_pages = next(m for k, m in meta["pages"].items() if k.startswith("greenhouse-report"))
    assert handbook_pages["document_title"] == "Greenhouse handbook"
    assert report_pages["document_period"] == "2026" and report_pages["document_language"] == "en"
    # the partition names the document; the run's figures are not repeated on every partition
    assert not {"document", "run_documents", "run_seconds"} & {
        label for m in meta.values() for p in m.values() for label in p
    }
    lake = pipeline.lake
    errors = query(lake, "select path, stage, reason from errors order by path").to_pylist()
    assert [(e["path"], e["stage"]) for e in errors] == [("broken.pdf", "pages"), ("empty.pdf", "pages")]
    assert all(e["reason"] for e in errors)
    per_doc = {
        r["path"]: r["n"]
        for r in query(
            lake, "select path, count(*) as n from chunks where profile = 'default' group by path"
        ).to_pylist()
    }
    assert set(per_doc) == {
        "greenhouse_report.pdf",
        "greenhouse_handbook.md",
        "supplier_prices.csv",
        "maintenance_notes.txt",
    }
    lineage = query(
        lake,
        "select c.chunk_id, c.source_sha256, s.sha256, c.reader, c.chunker, c.run_id "
        "from chunks c join sources s using (document_id)",
    ).to_pylist()
    assert all(r["source_sha256"] == r["sha256"] and r["reader"] and r["chunker"] for r in lineage)
    assert {r["run_id"] for r in lineage} == {result.run_id}
    rows = [r for r in query(lake, "select chunk_id from chunks where profile = 'retrieval'").to_pylist()]
    embedded = query(lake, "select count(*) as n from embeddings where profile = 'retrieval'").to_pylist()[0][
        "n"
    ]
    assert embedded == len(rows) == pipeline.index.count("retrieval") > 0
    assert {m["table_rows"] for m in meta["lancedb_retrieval"].values()} == {len(rows)}
    per_partition = {k: m["document_rows"] for k, m in meta["lancedb_retrieval"].items()}
    assert sum(per_partition.values()) == len(rows) and len(set(per_partition.values())) > 1
    # default is not indexed: its chunk map is materialized, nothing of it is embedded or in LanceDB
    assert query(lake, "select count(*) as n from chunks where profile = 'default'").to_pylist()[0]["n"] > 0
    assert (
        query(lake, "select count(*) as n from embeddings where profile = 'default'").to_pylist()[0]["n"] == 0
    )
    assert (
        pipeline.index.count("default") == 0
        and "embeddings_default" not in meta
        and "lancedb_default" not in meta
    )
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["valid_boxes"] and checks["unique_chunk_ids"] and checks["rows_match_parquet"]
    coverage: dict[str, dict[str, bool]] = {}  # chunk map -> partition -> passed
    for e in result.get_asset_check_evaluations():
        if e.check_name == "page_text_covered":
            coverage.setdefault(e.asset_key.to_user_string(), {})[e.partition] = e.passed
    chunked = {k for k, m in meta["chunk_map_default"].items() if m["chunks"]}
    assert len(chunked) == 4  # the two PDFs that failed to open have no chunks to judge
    # each document of both profiles' chunk maps covers its pages' words, judged on its own
    assert coverage == {
        "chunk_map_default": dict.fromkeys(chunked, True),
        "chunk_map_retrieval": dict.fromkeys(chunked, True),
    }
    markdown_checks = {
        e.check_name: e.passed
        for e in result.get_asset_check_evaluations()
        if e.asset_key.to_user_string() == "chunks/markdown_v1" and e.check_name != "document_processed"
    }
    assert markdown_checks and all(markdown_checks.values())  # the chunker's own checks, as asset checks
    assert "source_lines_covered" in markdown_checks
    handbook = next(m for k, m in meta["chunks/markdown_v1"].items() if k.startswith("greenhouse-handbook"))
    assert "chunker_metrics" in handbook and handbook["claimed_pages"] == 1
    assert "pages_claimed" not in handbook  # one name per field
    csv_md = next(m for k, m in meta["chunks/markdown_v1"].items() if k.startswith("supplier-prices"))
    assert csv_md["claimed_pages"] == 0 and csv_md["applies"].startswith("not applicable")
    assert "chunker_metrics" not in csv_md  # each partition shows its own document, not the batch's
    pictures = {k: m.get(PAGE_PICTURE) for k, m in meta["chunk_map_default"].items()}
    report = next(k for k in pictures if k.startswith("greenhouse-report"))
    assert (
        pictures[report].startswith("greenhouse_report.pdf, page 1")
        and "](data:image/png;base64," in pictures[report]
    )
    assert all(v is None for k, v in pictures.items() if k != report)  # only the PDF has geometry
    served = {k: m.get(PAGE_PICTURE) for k, m in meta["chunk_map_retrieval"].items()}
    assert served[report].startswith(
        "greenhouse_report.pdf, page 1"
    )  # pdf@4 passage boxes on the served page
    # Every chunk of a partition is readable in full on it: number, page, box, heading, id, text.
    listing = next(m for k, m in meta["chunk_map_default"].items() if k.startswith("greenhouse-handbook"))
    handbook_rows = query(
        lake,
        "select chunk_id, text from chunks where profile = 'default' and path = 'greenhouse_handbook.md' "
        'order by "index"',
    ).to_pylist()
    assert len(handbook_rows) > 3 and all(r["chunk_id"] in listing["all_chunks"] for r in handbook_rows)
    shown = listing["all_chunks"]
    assert all(line.replace("|", "/") in shown for r in handbook_rows for line in r["text"].splitlines())
    # So is every piece a chunker version cut, on that version's partition.
    pieces = next(m for k, m in meta["chunks/markdown_v1"].items() if k.startswith("greenhouse-handbook"))
    claim_texts = query(
        lake,
        "select text from claims where chunker = 'markdown@1' and document_id like 'greenhouse-handbook%'",
    ).to_pylist()
    assert len(claim_texts) > 3 and "piece 0" in pieces["all_pieces"]
    assert all(
        line.replace("|", "/") in pieces["all_pieces"] for r in claim_texts for line in r["text"].splitlines()
    )
    assert "all_pieces" not in csv_md  # a version that cut nothing lists nothing
    chunk_counts = {k: m["chunks"] for k, m in meta["chunk_map_default"].items()}
    assert chunk_counts[report] == per_doc["greenhouse_report.pdf"]


def test_a_second_run_gives_identical_ids_and_embeds_nothing(data_dir, sample_sources):  # T-E1
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    keys = register(pipeline, instance)
    first = run_batch(pipeline, instance, keys)
    ids_before = query(pipeline.lake, "select chunk_id from chunks order by chunk_id").to_pylist()
    assert total(first, "embeddings_retrieval", "embedded") > 0
    second = run_batch(pipeline, instance, keys)
    assert total(second, "embeddings_retrieval", "embedded") == 0
    assert set(statuses(second, "sources").values()) == {"unchanged"} and len(
        statuses(second, "sources")
    ) == len(keys)
    assert query(pipeline.lake, "select chunk_id from chunks order by chunk_id").to_pylist() == ids_before


def test_a_third_party_chunker_gets_an_asset_and_a_config_change_new_ids_for_its_documents_only(
    data_dir, sample_sources, tmp_path, monkeypatch
):  # T-E2
    site = install_distribution(
        tmp_path / "site", "acme_sized", SIZED_SOURCE, {"sized": "acme_sized:SizedChunker"}
    )
    monkeypatch.syspath_prepend(str(site))
    pipeline = fresh_pipeline(data_dir)
    keys = {
        k.to_user_string()
        for k in build_definitions(pipeline.settings).resolve_asset_graph().get_all_asset_keys()
    }
    assert "chunks/sized_v1" in keys
    instance = temporary_instance(data_dir)
    docs = register(pipeline, instance)
    run_batch(pipeline, instance, docs)
    sql = (
        "select path, chunker, chunk_id from chunks where profile = 'default' order by path, page, \"index\""
    )
    before = query(pipeline.lake, sql).to_pylist()
    assert {r["chunker"] for r in before if r["path"] == "maintenance_notes.txt"} == {"sized@1"}
    (data_dir / "ingest_pipeline.toml").write_text('[chunkers."sized@1"]\nsize = 25\n')
    pipeline = fresh_pipeline(data_dir)
    result = run_batch(pipeline, instance, docs)
    after = query(pipeline.lake, sql).to_pylist()
    notes_before = [r["chunk_id"] for r in before if r["path"] == "maintenance_notes.txt"]
    notes_after = [r["chunk_id"] for r in after if r["path"] == "maintenance_notes.txt"]
    assert len(notes_after) > len(notes_before) and not set(notes_after) & set(notes_before)
    others = lambda rows: [r for r in rows if r["path"] != "maintenance_notes.txt"]  # noqa: E731
    assert others(after) == others(before)
    assert set(statuses(result, "pages").values()) == {"unchanged"}  # unrelated steps stay cached


def test_the_code_location_loads_for_dagster(data_dir):
    root = Path(__file__).resolve().parents[2]
    env = {
        "INGEST_DATA": str(data_dir),
        "DAGSTER_HOME": str(data_dir / "dagster_home"),
        "PATH": "/usr/bin:/bin",
    }
    (data_dir / "dagster_home").mkdir(exist_ok=True)
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "dagster"),
            "definitions",
            "validate",
            "-w",
            str(root / "workspace.yaml"),
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr[-2000:]


IMAGE_SOURCE = '''
from ingest_pipeline.contract import ChunkPiece, PageChunks


class Snapshot:
    """Claims every PDF page with a (fake) picture of it."""

    id = "snapshot"
    version = 1

    def chunk(self, content, media_type, pages):
        if media_type != "application/pdf":
            return ()
        return tuple(PageChunks(page=p.page, pieces=(ChunkPiece(image=b"\\x89PNG-page-%d" % p.page,
                                                                bbox=(0, 0, 1, 1)),)) for p in pages)
'''


def test_image_chunks_are_indexed_without_a_vector_and_reported(
    data_dir, sample_sources, tmp_path, monkeypatch
):
    site = install_distribution(
        tmp_path / "site", "acme_snapshot", IMAGE_SOURCE, {"snapshot": "acme_snapshot:Snapshot"}
    )
    monkeypatch.syspath_prepend(str(site))
    write(data_dir / "ingest_pipeline.toml", "[profiles.default]\nindexed = true\n")  # the snapshot's profile
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    result = run_batch(pipeline, instance, register(pipeline, instance))
    assert total(result, "embeddings_default", "images_without_vector") == 2  # the report has two pages
    table = pipeline.index.open("default").to_arrow().to_pylist()
    images = [r for r in table if r["modality"] == "image"]
    assert len(images) == 2 and all(
        r["vector"] is None and r["path"] == "greenhouse_report.pdf" for r in images
    )
    assert (
        len(table)
        == query(pipeline.lake, "select count(*) as n from chunks where profile = 'default'").to_pylist()[0][
            "n"
        ]
    )
    hits = pipeline.index.search(
        "retrieval", "tomato", pipeline.embedder.embed(["tomato"])[0], k=20, mode="vector"
    )
    assert hits and all(h["modality"] == "text" for h in hits)
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks["rows_match_parquet"]


def test_retrieval_eval_records_quality_with_lineage_to_the_chunk_map(data_dir, sample_sources):
    from dagster import AssetKey

    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    ingest_run = run_batch(pipeline, instance, register(pipeline, instance))
    defs = build_definitions(pipeline.settings)
    eval_asset = defs.resolve_assets_def(AssetKey("retrieval_eval_retrieval"))
    upstream = {k.to_user_string() for k in eval_asset.asset_deps[AssetKey("retrieval_eval_retrieval")]}
    assert upstream == {"chunk_map_retrieval", "lancedb_retrieval"}
    from dagster import materialize

    result = materialize([eval_asset], instance=instance)  # resources come bound from the definitions
    meta = materializations(result)["retrieval_eval_retrieval"][None]
    assert meta["questions"] == 13 and 0.0 <= meta["mrr@10"] <= 1.0 and meta["recall@10"] >= meta["recall@1"]
    assert meta["chunks"] > 0 and meta["mean_tokens_per_chunk"] > 0
    assert meta["measured_chunk_map_run"] == ingest_run.run_id


def test_a_chunker_config_edited_for_one_run_cuts_new_chunks_with_a_new_config_hash(data_dir, sample_sources):
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    docs = register(pipeline, instance)
    run_batch(pipeline, instance, docs)
    sql = (
        "select chunk_id, config_hash from chunks where profile = 'default' and chunker = 'markdown@1' "
        "order by chunk_id"
    )
    before = query(pipeline.lake, sql).to_pylist()
    edited = {"chunks__markdown_v1": {"config": {"max_chars": 300, "target_chars": 200, "min_chars": 40}}}
    result = run_batch(pipeline, instance, docs, ops_config=edited)
    after = query(pipeline.lake, sql).to_pylist()
    assert after and before
    assert {r["config_hash"] for r in after} != {r["config_hash"] for r in before}
    assert not {r["chunk_id"] for r in after} & {r["chunk_id"] for r in before}
    meta = stories(result)
    assert {m["config_hash"] for m in meta["chunks/markdown_v1"].values()} == {after[0]["config_hash"]}


def test_the_served_texts_reach_the_model_while_the_rest_of_the_run_parses_and_merges(
    data_dir, sample_sources
):
    import os

    from dagster import DagsterEventType

    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    keys = register(pipeline, instance)
    result = run_batch(pipeline, instance, keys)
    assert result.success
    started = {
        e.dagster_event.step_key: e.timestamp
        for e in instance.all_logs(result.run_id, of_type=DagsterEventType.STEP_START)
    }
    order = sorted(started, key=started.get)
    registry = pipeline.resources["chunkers"].registry()
    retrieval = next(p for p in pipeline.settings.profiles if p.name == "retrieval")
    served = {"chunk_map_retrieval", "embeddings_retrieval", "lancedb_retrieval"} | {
        f"chunks__{c.id}_v{c.version}" for c in registry.order_for(retrieval.chunkers)
    }
    leads = {
        f"chunks__{c.id}_v{c.version}"
        for c in registry.order_for(retrieval.chunkers)[: len(retrieval.chunkers)]
    }
    others = [step for step in order if step not in served and step not in ("sources", "pages")]
    assert others  # the unindexed profiles' versions and chunk maps
    # the versions that lead the served profile for their formats come straight after the pages
    assert set(order[2 : 2 + len(leads)]) == leads
    # the served chain first, its embeddings step last: everything else runs in between
    assert all(
        order.index("chunk_map_retrieval") < order.index(s) < order.index("embeddings_retrieval")
        for s in others
    )
    assert order[-2:] == ["embeddings_retrieval", "lancedb_retrieval"]
    # ... while the model works on the served texts: it was handed them before the other
    # steps began, its cache shards hold every vector the run embedded, and they count as
    # embedded by this run (not as cached)
    logs = [e for e in instance.all_logs(result.run_id) if e.dagster_event is None]
    handed = [e.timestamp for e in logs if "while the run's other steps go on" in e.user_message]
    assert len(handed) == 1 and handed[0] < min(started[s] for s in others)
    # the PDF passages went to the model as pdf@4 wrote each document's claims, before the
    # fallback versions and the chunk map ran: the chunk map found all but a few there
    early = [
        e
        for e in logs
        if e.step_key == "chunks__pdf_v4" and "to the model as the documents' claims" in e.user_message
    ]
    assert len(early) == 1 and early[0].timestamp < started["chunk_map_retrieval"]
    fed = int(early[0].user_message.split()[1])
    assert fed > 0
    shards = [
        f
        for f in pipeline.store.embedding_cache_files(pipeline.resources["embedder"].model_id)
        if os.path.basename(f).startswith(result.run_id)
    ]
    assert shards and all(os.path.basename(f).startswith(f"{result.run_id}-ahead-") for f in shards)
    ahead = sum(pipeline.store.read_cache_file(f).num_rows for f in shards)
    assert total(result, "embeddings_retrieval", "embedded") == ahead > 0
    assert total(result, "embeddings_retrieval", "cached") == 0
