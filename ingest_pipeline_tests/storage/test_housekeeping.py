"""Housekeeping on real LanceDB tables and a real lake: compaction, old versions, indices,
the embedding cache, leftovers of killed writes."""

import os
import time
from datetime import timedelta

import numpy as np
import pyarrow as pa

from ingest_pipeline.stages import EmbeddingCache
from ingest_pipeline.storage import housekeeping
from ingest_pipeline.storage.lake import Lake
from ingest_pipeline.storage.store import Store
from ingest_pipeline.storage.vector_index import VectorIndex, index_schema

DIM = 16


def _rows(doc: str, ids: list[str], rng) -> pa.Table:
    vectors = rng.normal(size=(len(ids), DIM)).astype(np.float32)
    return pa.Table.from_pylist(
        [
            {
                "chunk_id": cid,
                "document_id": doc,
                "path": f"{doc}.txt",
                "profile": "default",
                "page": 1,
                "index": i,
                "label": f"page:1/chunk:{i}",
                "text": f"{doc} text number {i} about {cid}",
                "bbox": None,
                "bbox_reason": "no_geometry",
                "role": None,
                "content_type": None,
                "header_path": [],
                "chunker": "page@1",
                "config_hash": "h",
                "reader": "text@1",
                "source_sha256": "s",
                "run_id": "r",
                "modality": "text",
                "vector": vectors[i].tolist(),
            }
            for i, cid in enumerate(ids)
        ],
        schema=index_schema(DIM),
    )


def test_optimize_compacts_fragments_drops_old_versions_and_keeps_every_row(tmp_path):
    rng = np.random.default_rng(1)
    index = VectorIndex(str(tmp_path / "lancedb"), dim=DIM)
    for n in range(12):  # twelve documents, each its own merge commit and fragment
        index.sync_document("default", f"d{n}", _rows(f"d{n}", [f"d{n}-{i}" for i in range(5)], rng))
    index.sync_document("default", "d3", _rows("d3", ["d3-0", "d3-new"], rng))  # an update leaves deletions
    table = index.open("default")
    expected = sorted(table.to_arrow().column("chunk_id").to_pylist())

    [report] = housekeeping.optimize_lancedb(index, keep_versions=timedelta(0), min_vector_rows=10**9)

    assert report.rows == len(expected) == 11 * 5 + 2
    assert report.fragments_before >= 12 and report.fragments_after < report.fragments_before
    assert report.versions_before >= 13 and report.versions_after == 1
    assert report.created == ["search_text (FTS)"] and report.indices
    table = index.open("default")
    assert sorted(table.to_arrow().column("chunk_id").to_pylist()) == expected
    assert index.search("default", "d3-new", None, k=1, mode="text")[0]["chunk_id"] == "d3-new"
    again = housekeeping.optimize_lancedb(index, keep_versions=timedelta(0), min_vector_rows=10**9)[0]
    assert again.created == [] and again.rows == report.rows  # nothing twice


def test_a_large_table_gets_a_vector_index_that_search_uses(tmp_path):
    rng = np.random.default_rng(2)
    index = VectorIndex(str(tmp_path / "lancedb"), dim=DIM)
    index.sync_document("default", "big", _rows("big", [f"c{i}" for i in range(600)], rng))
    [report] = housekeeping.optimize_lancedb(index, min_vector_rows=500)
    assert "vector (IVF_RQ)" in report.created
    table = index.open("default")
    assert any(tuple(i.columns) == ("vector",) for i in table.list_indices())
    target = table.to_arrow().filter(pa.compute.equal(table.to_arrow().column("chunk_id"), "c123"))
    vector = target.column("vector").to_pylist()[0]
    hits = index.search("default", "", vector, k=3, mode="vector")
    assert "c123" in [h["chunk_id"] for h in hits]


def test_the_embedding_cache_folds_into_one_shard_with_every_vector(tmp_path):
    store = Store.at(str(tmp_path / "lake"))
    cache = EmbeddingCache(store, "model-x")
    rng = np.random.default_rng(3)
    vectors = {f"sha{i}": rng.normal(size=4).astype(np.float32) for i in range(40)}
    items = list(vectors.items())
    for shard in range(20):  # overlapping shards, as two concurrent runs write them
        cache.put(dict(items[shard * 2 : shard * 2 + 4]), shard=f"run{shard}")
    assert len(store.embedding_cache_files("model-x")) == 20

    result = housekeeping.compact_embedding_cache(store, "model-x", min_shards=4)

    assert result == {"shards_before": 20, "shards_after": 1, "vectors": 40}
    found = cache.get(vectors)
    assert set(found) == set(vectors)
    for sha, vector in vectors.items():
        np.testing.assert_array_equal(found[sha], vector)
    assert housekeeping.compact_embedding_cache(store, "model-x", min_shards=4)["shards_after"] == 1


def test_only_old_temporary_files_of_killed_writes_are_swept(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    lake.write("pages", ("doc",), pa.table({"a": [1]}))
    folder = tmp_path / "lake" / "pages"
    stale, fresh = folder / ".dead.tmp", folder / ".inflight.tmp"
    stale.write_bytes(b"half a file")
    fresh.write_bytes(b"being written")
    an_hour_ago = time.time() - 7200
    os.utime(stale, (an_hour_ago, an_hour_ago))
    assert housekeeping.sweep_temporary_files(Store(lake)) == 1
    assert not stale.exists() and fresh.exists()
    assert lake.read("pages", "doc").column("a").to_pylist() == [1]


def test_the_scheduled_job_compacts_a_real_root_and_waits_for_the_lancedb_pool(data_dir):
    from ingest_pipeline.definitions import build_definitions
    from ingest_pipeline.jobs import HOUSEKEEPING_JOB
    from ingest_pipeline.resources import resources_for
    from ingest_pipeline.settings import load_settings
    from ingest_pipeline_tests.dagster_helpers import temporary_instance

    settings = load_settings(data_dir)
    defs = build_definitions(settings)
    job = defs.resolve_job_def(HOUSEKEEPING_JOB)
    assert {s.job_name for s in defs.schedules} >= {HOUSEKEEPING_JOB}
    assert (
        job.graph.node_named("optimize_lancedb").definition.pool == "lancedb"
    )  # never beside LanceDB writes

    rng = np.random.default_rng(4)
    index = VectorIndex(settings.lancedb_uri, dim=DIM)
    for n in range(6):
        index.sync_document("default", f"d{n}", _rows(f"d{n}", [f"d{n}-{i}" for i in range(3)], rng))
    before = housekeeping._fragments(index.open("default"))
    result = job.execute_in_process(instance=temporary_instance(data_dir), resources=resources_for(settings))
    assert result.success
    table = index.open("default")
    assert housekeeping._fragments(table) < before and table.count_rows() == 18
    assert any(tuple(i.columns) == ("search_text",) for i in table.list_indices())
    assert os.path.exists(settings.catalog_path)
