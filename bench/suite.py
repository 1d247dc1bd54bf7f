"""The operations benchmark: every figure as a ratio against an anchor measured in the same
run, written as one JSON report under bench/results/.

    .venv/bin/python bench/suite.py [--only NAME ...] [--out FILE] [--scratch DIR]

Sections (``--only`` picks some):

- ``incremental``: a cold ingest of the corpus, then the same ingest with nothing changed
  (target: the re-run ≤ 5% of the cold run).
- ``chunker_config``: one chunker's configuration changed: which assets did work, which
  documents, and how many texts were embedded against how many texts changed.
- ``orchestration``: 100 documents through the Dagster runs against the same stage
  functions in a plain loop, each from a cold root (target ≤ 1.25×); small documents, so
  this is the worst case of Dagster's cost per partition. One untimed pass of each side
  over a file of every kind first, then ``--repeat N`` pairs (3), the order alternating; the
  ratio is of the two sides' medians.
- ``orchestration_corpus``: the same over the 62 corpus documents.
- ``dagster_alone``: the 100 documents again with every stage returning at once, at batches
  of 25, 50 and 100: Dagster's cost per run and per partition, without the work.
- ``sensor``: a tick over 10,000 files with nothing new, against a bare walk + stat of
  the same files.
- ``duckdb``: count and group-by over 1,000,000 chunk rows through the catalog views (one
  file per document, as the lake stores them) against the same rows in one Parquet file.
- ``lancedb``: hybrid search p50/p95 at 100,000 and 1,000,000 rows with the indices
  housekeeping builds (FTS + IVF_RQ), against a flat vector scan of the same table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)

CORPUS = ROOT.parent / "shared" / "corpus" / "files"
RESULTS = ROOT / "bench" / "results"


def _clock(fn, *args, **kwargs):
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - started


def _cpu_seconds() -> float:
    """This process's CPU time and that of its children it has waited for (the parse worker,
    stopped at the end of each side)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _clock_both(fn):
    """``fn()``'s value, wall seconds and CPU seconds."""
    cpu = _cpu_seconds()
    value, wall = _clock(fn)
    return value, wall, _cpu_seconds() - cpu


def _fresh(scratch: Path, name: str) -> Path:
    path = scratch / name
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def _pipeline(data: Path):
    from ingest_pipeline.resources import parts_for

    return parts_for(str(data))


def _asset_work(instance, run_ids: list[str]) -> dict[str, dict[str, int]]:
    """Per asset: documents that did work (new/changed), failed, and were found unchanged,
    from each partition's own story (its ``status`` line, an observation of the partition)."""
    from dagster import DagsterEventType

    work: dict[str, dict[str, int]] = {}
    for run_id in run_ids:
        for record in instance.all_logs(run_id, of_type=DagsterEventType.ASSET_OBSERVATION):
            story = record.dagster_event.event_specific_data.asset_observation
            status = str(story.metadata["status"].value) if "status" in story.metadata else ""
            slot = work.setdefault(
                story.asset_key.to_user_string(), {"did_work": 0, "failed": 0, "unchanged": 0}
            )
            if status.startswith(("unchanged", "not applicable", "skipped")):
                slot["unchanged"] += 1
            elif status.startswith("FAILED"):
                slot["failed"] += 1
            elif status:
                slot["did_work"] += 1
    return dict(sorted(work.items()))


# ---------------------------------------------------------------- incremental + chunker config


def bench_incremental(scratch: Path) -> dict:
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.instance.home import instance_for

    data = _fresh(scratch, "incremental") / "data"
    data.mkdir()
    p = _pipeline(data)
    p.embedder.embed(["warm up"])
    cold, cold_s = _clock(ingest, p, [str(CORPUS)])
    warm, warm_s = _clock(ingest, p, [str(CORPUS)])
    result = {
        "documents": cold.documents,
        "failed": len(cold.failed),
        "chunks_served": cold.chunks,
        "texts_embedded_cold": cold.texts_embedded,
        "cold_seconds": round(cold_s, 2),
        "rerun_seconds": round(warm_s, 2),
        "rerun_texts_embedded": warm.texts_embedded,
        "rerun_runs": len(warm.run_ids),
        "ratio_rerun_over_cold": round(warm_s / cold_s, 4),
        "target": "<= 0.05",
    }

    # One chunker's configuration changes: markdown@1 packs to a smaller target.
    chunk_ids_before = _chunk_texts(p)
    (data / "ingest_pipeline.toml").write_text(
        '[chunkers."markdown@1"]\ntarget_chars = 500\nmax_chars = 900\n'
    )
    p2 = _pipeline(data)
    changed, changed_s = _clock(ingest, p2, [str(CORPUS)])
    after = _chunk_texts(p2)
    new_texts = {t for t in after.values()} - set(chunk_ids_before.values())
    work = _asset_work(instance_for(p2.settings.dagster_home), changed.run_ids)
    worked = sorted(k for k, v in work.items() if v["did_work"])
    result["chunker_config"] = {
        "change": "markdown@1 target_chars 800 -> 500, max_chars 1200 -> 900",
        "seconds": round(changed_s, 2),
        "ratio_over_cold": round(changed_s / cold_s, 4),
        "assets_that_did_work": worked,
        "assets_unchanged": sorted(k for k, v in work.items() if not v["did_work"]),
        "documents_per_asset": work,
        "texts_embedded": changed.texts_embedded,
        "texts_new_in_chunk_maps": len(new_texts),
        "embedded_only_changed_texts": changed.texts_embedded == len(new_texts),
    }
    return result


def _chunk_texts(p) -> dict[str, str]:
    from ingest_pipeline.storage.catalog import query

    rows = query(
        p.lake, "select chunk_id, coalesce(embed_text, text) as t from chunks where text is not null"
    )
    return dict(zip(rows.column("chunk_id").to_pylist(), rows.column("t").to_pylist()))


# ---------------------------------------------------------------- orchestration overhead


REPEATS = 3  # pairs per orchestration section (--repeat)


def _hundred_documents(folder: Path) -> None:
    """100 text and Markdown documents cut from the corpus Markdown, a few chunks each."""
    texts = [p.read_text(errors="replace") for p in sorted((CORPUS / "md").glob("*.md"))]
    paragraphs = [para.strip() for t in texts for para in t.split("\n\n") if len(para.strip()) > 80]
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(100):
        body = "\n\n".join(paragraphs[(i * 4 + k) % len(paragraphs)] for k in range(4))
        if i % 2:
            (folder / f"doc_{i:03d}.md").write_text(f"# Document {i}\n\n{body}\n")
        else:
            (folder / f"doc_{i:03d}.txt").write_text(f"Document {i}\n\n{body}\n")


def plain_loop(p, folder: Path, batch: int | None = None) -> dict:
    """The same library calls as the ingest job, without Dagster: per batch (of ``run_batch``
    documents, as the ingest's runs), every stage
    for every document (embeddings and LanceDB for the indexed profiles only, as the asset
    graph has them), then the catalog. The checks the assets compute from the stages' output
    (``stages.claims.claim_findings``, ``stages.chunk_map.chunk_map_findings`` and its page
    picture, ``stages.index.index_findings``) are library calls too, and run here as there;
    what only Dagster does (events, metadata values, run records) is what the ratio weighs."""
    from ingest_pipeline import stages
    from ingest_pipeline.documents import collect
    from ingest_pipeline.runtime.isolation import ParseWorker
    from ingest_pipeline.stages.chunk_checks import chunk_map_findings
    from ingest_pipeline.stages.claims import claim_findings
    from ingest_pipeline.stages.index import index_findings
    from ingest_pipeline.stages.page_pictures import page_picture
    from ingest_pipeline.storage.catalog import build_catalog

    parser = ParseWorker(p.settings.parse_timeout, p.settings.parse_memory_bytes)
    batch = batch or p.settings.run_batch
    entries = collect(p.settings, [str(folder)])
    p.store.save_inventory(entries)
    docs = [e.document_id for e in entries]
    used = []
    for profile in p.settings.profiles:
        for chunker in p.registry.order_for(profile.chunkers):
            if all(chunker is not u for u in used):
                used.append(chunker)
    embedded = 0
    for start in range(0, len(docs), batch):
        keys = docs[start : start + batch]
        for doc in keys:
            stages.guarded(
                p.store, "sources", doc, "loop", stages.observe_source, p.settings, p.store, doc, "loop"
            )
        for doc in keys:
            stages.guarded(
                p.store, "pages", doc, "loop", stages.read_document, p.settings, p.store, doc, "loop", parser
            )
        for chunker in used:
            info = p.registry.info(chunker)
            outcomes = [
                stages.guarded(
                    p.store,
                    f"chunks/{info.ref}",
                    doc,
                    "loop",
                    stages.run_chunker,
                    p.settings,
                    p.store,
                    chunker,
                    info,
                    doc,
                    "loop",
                    parser,
                )
                for doc in keys
            ]
            written = {o.document: o.kept["meta"] for o in outcomes if "meta" in o.kept}
            claim_findings(
                {
                    doc: written[doc] if doc in written else p.store.claim_meta(info.asset_name, doc) or {}
                    for doc in keys
                },
                tuple(getattr(chunker, "check_names", ()) or ()),
            )
        for profile in p.settings.profiles:
            outcomes = [
                stages.guarded(
                    p.store,
                    f"chunk_map/{profile.name}",
                    doc,
                    "loop",
                    stages.build_chunk_map,
                    p.store,
                    p.registry,
                    profile,
                    p.embedder,
                    doc,
                    "loop",
                )
                for doc in keys
            ]
            rows_by_doc, _ = chunk_map_findings(
                p.store, profile.name, keys, p.embedder.max_tokens, {o.document: o.kept for o in outcomes}
            )
            for rows in rows_by_doc.values():
                if rows:
                    page_picture(p.store, p.settings.passwords, rows)
            if not p.settings.is_indexed(profile):  # as the asset graph: no embeddings, no table
                continue
            outcomes = stages.embed_documents(p.store, p.embedder, profile, keys, "loop")
            embedded += sum(int(o.detail.get("embedded", 0) or 0) for o in outcomes)
            for doc in keys:
                stages.guarded(
                    p.store,
                    f"lancedb/{profile.name}",
                    doc,
                    "loop",
                    stages.index_document,
                    p.store,
                    p.index,
                    profile,
                    doc,
                    "loop",
                )
            p.index.refresh_text_index(profile.name)
            index_findings(p.store, p.index, profile.name, keys)
            p.index.count(profile.name)
    build_catalog(p.lake, p.settings.catalog_path)
    parser.close()
    return {"documents": len(docs), "texts_embedded": embedded}


def bench_orchestration(scratch: Path, repeats: int = REPEATS) -> dict:
    """100 small documents: the worst case, Dagster's cost per partition against little work."""
    base = _fresh(scratch, "orchestration")
    folder = base / "hundred"
    _hundred_documents(folder)
    return _orchestration(base, folder, repeats)


def bench_orchestration_corpus(scratch: Path, repeats: int = REPEATS) -> dict:
    """The 62 corpus documents (PDFs, Office files, CSV, Markdown) nobody here wrote."""
    return _orchestration(_fresh(scratch, "orchestration_corpus"), CORPUS, repeats)


def _orchestration(base: Path, folder: Path, repeats: int) -> dict:
    """``repeats`` pairs, each side from a cold root of its own, the order alternating (loop
    first, then Dagster first, ...) so neither side always pays the process's first imports
    and a cold page cache; the figure is the ratio of the two sides' medians, with every
    pair's seconds beside it (one pair alone varies by 10-15% on this machine)."""
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.storage.catalog import query

    _warm_up(base, folder)
    pairs, same = [], True
    for i in range(repeats):
        dagster_root, loop_root = base / f"dagster_{i}" / "data", base / f"loop_{i}" / "data"
        dagster_root.mkdir(parents=True)
        loop_root.mkdir(parents=True)
        pd, pl = _pipeline(dagster_root), _pipeline(loop_root)
        pd.embedder.embed(["warm up"])
        pl.embedder.embed(["warm up"])
        sides = {"loop": lambda: plain_loop(pl, folder), "dagster": lambda: ingest(pd, [str(folder)])}
        done = {
            side: _clock_both(sides[side])
            for side in (("loop", "dagster") if i % 2 == 0 else ("dagster", "loop"))
        }
        (loop, loop_s, loop_cpu), (report, dagster_s, dagster_cpu) = done["loop"], done["dagster"]
        same = same and sorted(query(pd.lake, "select chunk_id from chunks").column(0).to_pylist()) == sorted(
            query(pl.lake, "select chunk_id from chunks").column(0).to_pylist()
        )
        pairs.append(
            {
                "loop_first": i % 2 == 0,
                "dagster_seconds": round(dagster_s, 2),
                "plain_loop_seconds": round(loop_s, 2),
                "ratio": round(dagster_s / loop_s, 3),
                "dagster_cpu_seconds": round(dagster_cpu, 2),
                "plain_loop_cpu_seconds": round(loop_cpu, 2),
                "cpu_ratio": round(dagster_cpu / loop_cpu, 3),
            }
        )
    dagster_median = statistics.median(p["dagster_seconds"] for p in pairs)
    loop_median = statistics.median(p["plain_loop_seconds"] for p in pairs)
    return {
        "documents": report.documents,
        "runs": len(report.run_ids),
        "texts_embedded": report.texts_embedded,
        "loop_texts_embedded": loop["texts_embedded"],
        "same_chunk_ids": same,
        "pairs": pairs,
        "dagster_seconds": dagster_median,
        "plain_loop_seconds": loop_median,
        "ratio_dagster_over_loop": round(dagster_median / loop_median, 3),
        "median_of_pair_ratios": round(statistics.median(p["ratio"] for p in pairs), 3),
        "target": "<= 1.25",
        # CPU time (the process and its waited-for children) beside the wall clock: a second
        # view, less moved by how this machine schedules the two sides.
        "cpu_ratio_of_medians": round(
            statistics.median(p["dagster_cpu_seconds"] for p in pairs)
            / statistics.median(p["plain_loop_cpu_seconds"] for p in pairs),
            3,
        ),
    }


def _warm_up(base: Path, folder: Path) -> None:
    """One untimed pass of each side over the smallest file of every kind in ``folder``: the
    process's first imports, readers' set-up and the tokenizer's first load are paid here,
    not by whichever side the first pair happens to run first."""
    from ingest_pipeline.commands.ingest import ingest

    smallest: dict[str, Path] = {}
    for path in sorted(folder.rglob("*")):
        kind = path.suffix.lower()
        if path.is_file() and (kind not in smallest or path.stat().st_size < smallest[kind].stat().st_size):
            smallest[kind] = path
    files = base / "warm_up" / "files"
    files.mkdir(parents=True)
    for path in smallest.values():
        shutil.copy(path, files / path.name)
    for side in ("loop", "dagster"):
        root = base / "warm_up" / side / "data"
        root.mkdir(parents=True)
        p = _pipeline(root)
        if side == "loop":
            plain_loop(p, files)
        else:
            ingest(p, [str(files)])


def bench_dagster_alone(scratch: Path, batches=(25, 50, 100), repeats: int = 2) -> dict:
    """Dagster's own cost, with nothing else in it: the 100 documents of ``orchestration``
    ingested once for real (so every asset has its rows), then again with ``--force`` while
    every stage returns at once (``stages.guarded`` and ``stages.embed_documents`` replaced
    by functions that only say "unchanged"), at each batch size. What is left is the runs,
    steps, events and metadata, and the assets' checks (they still read what the first
    ingest wrote). The points are reported as measured, two ingests per batch size, not
    fitted to a line: on this machine they are not clean enough to split into a cost per
    run and a cost per partition."""
    from ingest_pipeline import stages
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.stages.common import Outcome

    base = _fresh(scratch, "dagster_alone")
    folder = base / "hundred"
    _hundred_documents(folder)
    real = stages.guarded, stages.embed_documents
    points = []
    for batch in batches:
        root = base / f"batch_{batch}" / "data"
        root.mkdir(parents=True)
        p = _pipeline(root)
        ingest(p, [str(folder)], batch_size=batch)
        stages.guarded = lambda _st, _stage, doc, *_a, **_k: Outcome(doc, "unchanged", {})
        stages.embed_documents = lambda _st, _emb, _prof, keys, *_a, **_k: [
            Outcome(d, "unchanged", {}) for d in keys
        ]
        try:
            for _ in range(repeats):
                report, seconds, cpu = _clock_both(
                    lambda: ingest(p, [str(folder)], batch_size=batch, force=True)
                )
                points.append(
                    {
                        "batch": batch,
                        "runs": len(report.run_ids),
                        "seconds": round(seconds, 2),
                        "cpu_seconds": round(cpu, 2),
                    }
                )
        finally:
            stages.guarded, stages.embed_documents = real
    by_batch = {
        str(b): statistics.median(pt["seconds"] for pt in points if pt["batch"] == b) for b in batches
    }
    return {
        "documents": 100,
        "points": points,
        "median_seconds_by_batch": by_batch,
        "note": "no stage work: the runs' fixed cost (15 steps each), the partitions' events and "
        "metadata, and the checks' reads",
    }


# ---------------------------------------------------------------- sensor


def bench_sensor(scratch: Path, files: int = 10_000) -> dict:
    from dagster import DagsterRunStatus, build_sensor_context
    from dagster._core.test_utils import create_run_for_test

    from ingest_pipeline.definitions import build_definitions
    from ingest_pipeline.instance.home import instance_for
    from ingest_pipeline.partitions import DOCUMENTS
    from ingest_pipeline.resources import IngestResource

    data = _fresh(scratch, "sensor") / "data"
    sources = data / "sources"
    for i in range(files):
        folder = sources / f"batch_{i // 500:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note_{i:05d}.txt").write_text(f"note {i}\n")
    p = _pipeline(data)
    instance = instance_for(p.settings.dagster_home)
    sensor = build_definitions(p.settings).resolve_sensor_def("source_files_sensor")
    try:
        from ingest_pipeline.resources import resources_for

        resources = resources_for(p.settings)
    except ImportError:
        resources = {"ingest": IngestResource(data=p.settings.data)}

    def tick(cursor):
        with build_sensor_context(instance=instance, cursor=cursor, resources=resources) as context:
            result = sensor(context)
        for request in result.dynamic_partitions_requests or []:
            if type(request).__name__ == "AddDynamicPartitionsRequest":
                instance.add_dynamic_partitions(DOCUMENTS, list(request.partition_keys))
            else:
                for key in request.partition_keys:
                    instance.delete_dynamic_partition(DOCUMENTS, key)
        # The daemon would launch the requested runs; here each is recorded as a run that
        # succeeded (running 10,000 documents is not what this measures).
        for request in result.run_requests:
            create_run_for_test(
                instance, job_name=request.job_name, status=DagsterRunStatus.SUCCESS, tags=dict(request.tags)
            )
        return result

    cursor, first_ticks, runs, discovery = None, [], 0, time.perf_counter()
    while True:
        result, seconds = _clock(tick, cursor)
        cursor = result.cursor
        first_ticks.append(seconds)
        runs += sum(1 for r in result.run_requests if r.job_name == "ingest_documents")
        if not result.run_requests and not result.dynamic_partitions_requests:
            break
        if len(first_ticks) > files:  # a sensor that never settles
            break
    discovery = time.perf_counter() - discovery
    idle = [_clock(tick, cursor)[1] for _ in range(3)]

    def walk():
        n = 0
        for current, _, names in os.walk(sources):
            for name in names:
                os.stat(os.path.join(current, name))
                n += 1
        return n

    walk_s = min(_clock(walk)[1] for _ in range(3))
    return {
        "files": files,
        "partitions": len(instance.get_dynamic_partitions(DOCUMENTS)),
        "ticks_to_discover_all": len(first_ticks) - 1,
        "ingest_runs_requested": runs,
        "discovery_seconds": round(discovery, 2),
        "slowest_discovery_tick_seconds": round(max(first_ticks), 3),
        "idle_tick_seconds": round(statistics.median(idle), 3),
        "bare_walk_and_stat_seconds": round(walk_s, 3),
        "ratio_idle_tick_over_walk": round(statistics.median(idle) / walk_s, 2),
        "cursor_bytes": len(cursor or ""),
    }


# ---------------------------------------------------------------- DuckDB


def bench_duckdb(scratch: Path, rows: int = 1_000_000, documents: int = 1_000) -> dict:
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ingest_pipeline.storage import tables
    from ingest_pipeline.storage.catalog import connect
    from ingest_pipeline.storage.lake import Lake

    root = _fresh(scratch, "duckdb")
    lake = Lake(str(root / "lake"))
    rng = np.random.default_rng(7)
    per_doc = rows // documents
    words = np.array([f"w{i}" for i in range(2000)])
    chunkers = np.array(["pdf@1", "markdown@1", "page@1", "pptx@1", "lines@1"])
    all_parts = []
    for d in range(documents):
        text = [" ".join(words[rng.integers(0, 2000, 25)]) for _ in range(per_doc)]
        doc = f"doc-{d:05d}"
        table = pa.table(
            {
                "chunk_id": [f"{doc}-{i}" for i in range(per_doc)],
                "label": [f"page:1/chunk:{i}" for i in range(per_doc)],
                "profile": ["default"] * per_doc,
                "document_id": [doc] * per_doc,
                "path": [f"{doc}.pdf"] * per_doc,
                "page": rng.integers(1, 40, per_doc).astype(np.int32),
                "index": np.arange(per_doc, dtype=np.int32),
                "text": text,
                "chars": np.array([len(t) for t in text], dtype=np.int32),
                "tokens": rng.integers(5, 250, per_doc).astype(np.int32),
                "chunker": chunkers[rng.integers(0, len(chunkers), per_doc)],
            }
        )
        full = pa.table(
            {
                f.name: (
                    table.column(f.name).cast(f.type)
                    if f.name in table.column_names
                    else pa.nulls(per_doc, f.type)
                )
                for f in tables.CHUNKS
            }
        )
        lake.write("chunks", ("default", doc), full)
        all_parts.append(full)
    single = root / "single.parquet"
    pq.write_table(pa.concat_tables(all_parts), single, compression="zstd")
    del all_parts
    count_sql = "select count(*) from chunks"
    group_sql = (
        "select chunker, count(*) as n, avg(tokens) as mean_tokens, sum(chars) from chunks group by all"
    )

    def timed(con, sql, repeat=3):
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            con.sql(sql).fetchall()
            times.append(time.perf_counter() - started)
        return min(times)

    lake_con = connect(lake)
    n = lake_con.sql(count_sql).fetchall()[0][0]
    lake_count, lake_group = timed(lake_con, count_sql), timed(lake_con, group_sql)
    one = duckdb.connect()
    one.execute(f"create view chunks as select * from read_parquet('{single}')")
    one_count, one_group = timed(one, count_sql), timed(one, group_sql)
    return {
        "rows": n,
        "files": documents,
        "lake_count_seconds": round(lake_count, 4),
        "lake_group_by_seconds": round(lake_group, 4),
        "one_file_count_seconds": round(one_count, 4),
        "one_file_group_by_seconds": round(one_group, 4),
        "ratio_count_lake_over_one_file": round(lake_count / one_count, 2),
        "ratio_group_by_lake_over_one_file": round(lake_group / one_group, 2),
    }


# ---------------------------------------------------------------- LanceDB


def _lance_table(index, rows: int, dim: int, rng, batch: int = 50_000):
    import pyarrow as pa
    import pyarrow.compute as pc

    from ingest_pipeline.storage.vector_index import index_schema

    words = np.array([f"term{i}" for i in range(20_000)])
    schema = index_schema(dim)

    def batches():
        for start in range(0, rows, batch):
            n = min(batch, rows - start)
            vectors = rng.normal(size=(n, dim)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            picks = rng.zipf(1.3, size=(n, 30)) % len(words)
            text = pc.binary_join_element_wise(*[pa.array(words[picks[:, j]]) for j in range(30)], " ")
            ids = [f"c{start + i}" for i in range(n)]
            columns = {
                "chunk_id": ids,
                "document_id": [f"d{(start + i) // 200}" for i in range(n)],
                "text": text,
                "profile": ["bench"] * n,
                "page": np.ones(n, dtype=np.int32),
                "index": np.arange(n, dtype=np.int32),
                "modality": ["text"] * n,
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), dim),
            }
            yield pa.RecordBatch.from_pydict(
                {f.name: (columns[f.name] if f.name in columns else pa.nulls(n, f.type)) for f in schema},
                schema=schema,
            )

    return index.db.create_table("chunks_bench", data=batches(), schema=schema, mode="overwrite"), words


def bench_lancedb(scratch: Path, sizes=(100_000, 1_000_000), queries: int = 50) -> dict:
    from ingest_pipeline.storage import housekeeping
    from ingest_pipeline.storage.vector_index import VectorIndex

    dim = 384
    out = {}
    for rows in sizes:
        root = _fresh(scratch, f"lancedb_{rows}")
        rng = np.random.default_rng(rows)
        index = VectorIndex(str(root), dim)
        (table, words), load_s = _clock(_lance_table, index, rows, dim, rng)
        query_vectors = rng.normal(size=(queries, dim)).astype(np.float32)
        query_texts = [" ".join(words[rng.zipf(1.3, 3) % len(words)]) for _ in range(queries)]

        def search_times(mode, n=queries):
            times = []
            for i in range(n):
                started = time.perf_counter()
                index.search("bench", query_texts[i], query_vectors[i].tolist(), k=10, mode=mode)
                times.append(time.perf_counter() - started)
            return times

        reports, build_s = _clock(housekeeping.optimize_lancedb, index)
        index.search("bench", query_texts[0], query_vectors[0].tolist(), k=10, mode="hybrid")  # warm caches
        hybrid = search_times("hybrid")
        vector = search_times("vector")
        # The anchor: the same vector query as a flat scan (no index), a few times.
        table = index.open("bench")
        flat, recall = [], []
        for i in range(min(10, queries)):
            started = time.perf_counter()
            exact = (
                table.search(query_vectors[i].tolist(), vector_column_name="vector")
                .metric("cosine")
                .bypass_vector_index()
                .limit(10)
                .to_arrow()
            )
            flat.append(time.perf_counter() - started)
            found = index.search("bench", "", query_vectors[i].tolist(), k=10, mode="vector")
            recall.append(
                len({h["chunk_id"] for h in found} & set(exact.column("chunk_id").to_pylist())) / 10
            )
        q = lambda xs, p: round(float(np.percentile(xs, p)) * 1000, 2)  # noqa: E731
        out[str(rows)] = {
            "rows": table.count_rows(),
            "dim": dim,
            "load_seconds": round(load_s, 1),
            "index_build_seconds": round(build_s, 1),
            "indices": reports[0].indices,
            "created": reports[0].created,
            "hybrid_p50_ms": q(hybrid, 50),
            "hybrid_p95_ms": q(hybrid, 95),
            "vector_p50_ms": q(vector, 50),
            "vector_p95_ms": q(vector, 95),
            "flat_vector_p50_ms": q(flat, 50),
            "vector_recall_at_10_vs_flat": round(float(np.mean(recall)), 3),
            "ratio_hybrid_p50_over_flat_vector_p50": round(
                np.percentile(hybrid, 50) / np.percentile(flat, 50), 3
            ),
        }
        shutil.rmtree(root, ignore_errors=True)
    return out


SECTIONS = {
    "incremental": bench_incremental,
    "orchestration": bench_orchestration,
    "orchestration_corpus": bench_orchestration_corpus,
    "dagster_alone": bench_dagster_alone,
    "sensor": bench_sensor,
    "duckdb": bench_duckdb,
    "lancedb": bench_lancedb,
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*", choices=sorted(SECTIONS), help="sections to run (default: all)")
    parser.add_argument("--out", default=str(RESULTS / "suite.json"))
    parser.add_argument("--scratch", help="working folder (default: a temporary one, removed after)")
    parser.add_argument("--repeat", type=int, default=REPEATS, help="pairs per orchestration section")
    args = parser.parse_args()
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="ingest-suite-"))
    out = Path(args.out)
    report = json.loads(out.read_text()) if out.exists() and args.only else {}
    report.setdefault("sections", {})
    report["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_at_start": os.getloadavg(),
    }
    try:
        for name in args.only or list(SECTIONS):
            print(f"== {name}", file=sys.stderr, flush=True)
            extra = {"repeats": max(1, args.repeat)} if name.startswith("orchestration") else {}
            value, seconds = _clock(SECTIONS[name], scratch, **extra)
            value["section_seconds"] = round(seconds, 1)
            value["measured_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
            value.update(provenance())
            value["load_average_after"] = [round(x, 1) for x in os.getloadavg()]
            report["sections"][name] = value
            print(json.dumps({name: value}, indent=2), flush=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
