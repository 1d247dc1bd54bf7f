"""The source sensor over 10,000 files, through build_sensor_context on a real instance.

Runs the sensor requests are not executed (10,000 documents would take hours here): each is
recorded as a run that succeeded, which is what the sensor reads back from the instance.
"""

import math
import os
import re
import time

import pyarrow as pa
import pytest
from dagster import DagsterRunStatus
from dagster._core.test_utils import create_run_for_test

from ingest_pipeline.definitions import build_definitions
from ingest_pipeline.documents import entry_for
from ingest_pipeline.partitions import DOCUMENTS
from ingest_pipeline.sensors import folder as sensors
from ingest_pipeline.sensors.batches import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from ingest_pipeline.storage.vector_index import index_schema
from ingest_pipeline_tests.dagster_helpers import fresh_pipeline, sensor_tick, temporary_instance

FILES = 10_000
ODD_NAMES = [
    "a,b|c.txt",
    "naïve café.md",
    "日本語のメモ.txt",
    "spaces   and\ttabs.txt",
    "semi;colon'quote\".csv",
    "UPPER.TXT",
    "upper.txt",
    "-leading-dash.txt",
    "[brackets] {braces} (parens).md",
    "x" * 200 + ".txt",
    "emoji 🌱 notes.md",
    "percent %20 and #hash?.txt",
    "new\nline.txt",
]


class Counting:
    """Counts calls to instance methods the sensor should make once per tick."""

    def __init__(self, instance, monkeypatch, names=("get_dynamic_partitions", "get_runs")):
        self.calls = {n: 0 for n in names}
        for name in names:
            original = getattr(instance, name)

            def wrapped(*args, _name=name, _original=original, **kwargs):
                self.calls[_name] += 1
                return _original(*args, **kwargs)

            monkeypatch.setattr(instance, name, wrapped)

    def reset(self):
        for name in self.calls:
            self.calls[name] = 0


def _tick(pipeline, instance, sensor, cursor):
    result = sensor_tick(pipeline.settings, instance, cursor, sensor)
    for request in result.run_requests:  # the daemon launches them; here they "succeed"
        create_run_for_test(
            instance, job_name=request.job_name, status=DagsterRunStatus.SUCCESS, tags=dict(request.tags)
        )
    return result


def _covered(result, keys):
    out = []
    for run in result.run_requests:
        if run.job_name == "ingest_documents":
            start = keys.index(run.tags[ASSET_PARTITION_RANGE_START_TAG])
            end = keys.index(run.tags[ASSET_PARTITION_RANGE_END_TAG])
            out += keys[start : end + 1]
    return out


@pytest.fixture(scope="module")
def scale_root(tmp_path_factory):
    data = tmp_path_factory.mktemp("sensor_scale") / "data"
    sources = data / "sources"
    for i in range(FILES - len(ODD_NAMES)):
        folder = sources / f"folder_{i // 400:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note_{i:05d}.txt").write_text(f"note {i}\n")
    for name in ODD_NAMES:
        (sources / "odd").mkdir(exist_ok=True)
        (sources / "odd" / name).write_text(f"file called {name!r}\n")
    return data


def test_ten_thousand_files(scale_root, monkeypatch):
    pipeline = fresh_pipeline(scale_root)
    instance = temporary_instance(scale_root)
    sensor = build_definitions(pipeline.settings).resolve_sensor_def("source_files_sensor")
    counting = Counting(instance, monkeypatch)
    per_tick_runs = math.ceil(sensors.MAX_FILES_PER_TICK / pipeline.settings.run_batch) + 1

    # Discovery: bounded work per tick, resumed from the cursor, until every file is seen.
    cursor, ticks = None, 0
    while True:
        counting.reset()
        result = _tick(pipeline, instance, sensor, cursor)
        cursor, ticks = result.cursor, ticks + 1
        assert counting.calls["get_dynamic_partitions"] == 1  # known keys read once per tick
        assert counting.calls["get_runs"] <= 1  # every pending batch looked up in one query
        ingest_runs = [r for r in result.run_requests if r.job_name == "ingest_documents"]
        assert len(ingest_runs) <= per_tick_runs  # batched runs, not one per file
        if not result.run_requests and not result.dynamic_partitions_requests:
            break
        assert ticks < 3 * FILES // sensors.MAX_FILES_PER_TICK, "the sensor does not settle"
    keys = instance.get_dynamic_partitions(DOCUMENTS)
    assert len(keys) == len(set(keys)) == FILES
    assert all(re.fullmatch(r"[a-z0-9_-]{1,80}", k) for k in keys), [
        k for k in keys if not re.fullmatch(r"[a-z0-9_-]{1,80}", k)
    ][:5]

    # A tick with nothing new touches no file and asks for nothing.
    since = time.time()
    counting.reset()
    idle = _tick(pipeline, instance, sensor, cursor)
    assert not idle.run_requests and not idle.dynamic_partitions_requests and idle.skip_reason
    assert counting.calls == {"get_dynamic_partitions": 1, "get_runs": 0}
    assert not [p for p in pipeline.lake.files("inventory") if os.path.getmtime(p) > since]

    # Two changed files and two new ones: one batched run covering exactly them.
    sources = scale_root / "sources"
    changed = [sources / "folder_03" / "note_01234.txt", sources / "odd" / "naïve café.md"]
    for path in changed:
        path.write_text(path.read_text() + "changed\n")
        os.utime(path, (time.time() + 5, time.time() + 5))
    added = [sources / "folder_24" / "added one.txt", sources / "new folder" / "added, two.md"]
    for path in added:
        path.parent.mkdir(exist_ok=True)
        path.write_text("new\n")
    result = _tick(pipeline, instance, sensor, idle.cursor)
    keys = instance.get_dynamic_partitions(DOCUMENTS)
    expected = {entry_for(pipeline.settings, str(p)).document_id for p in changed + added}
    assert sorted(_covered(result, keys)) == sorted(expected)
    # Runs cover contiguous key ranges: the two changed files and the two new ones (appended) are 3 ranges.
    assert len([r for r in result.run_requests if r.job_name == "ingest_documents"]) <= 3
    cursor = _tick(pipeline, instance, sensor, result.cursor).cursor  # settles them

    # Deleted files leave LanceDB, the lake and the partitions, in bounded ticks.
    doomed = (
        sorted((sources / "folder_05").iterdir())
        + sorted((sources / "folder_06").iterdir())
        + [sources / "odd" / "a,b|c.txt"]
    )
    doomed_ids = [entry_for(pipeline.settings, str(p)).document_id for p in doomed]
    rows = pa.Table.from_pylist(
        [
            {
                "chunk_id": f"c-{d}",
                "document_id": d,
                "text": "t",
                "modality": "text",
                "vector": [0.1] * pipeline.index.dim,
            }
            for d in doomed_ids[:50]
        ],
        schema=index_schema(pipeline.index.dim),
    )
    for doc in doomed_ids[:50]:
        pipeline.lake.write("chunks", ("default", doc), pa.table({"chunk_id": [f"c-{doc}"]}))
    pipeline.index.open("default", create=True).add(rows)
    survivor = keys[0]
    for path in doomed:
        path.unlink()
    for _ in range(5):
        result = _tick(pipeline, instance, sensor, cursor)
        cursor = result.cursor
        if not result.dynamic_partitions_requests:
            break
    remaining = set(instance.get_dynamic_partitions(DOCUMENTS))
    assert not remaining & set(doomed_ids) and survivor in remaining
    assert len(remaining) == FILES + len(added) - len(doomed)
    assert pipeline.index.count("default") == 0
    names = {
        os.path.basename(p)[: -len(".parquet")]
        for t in ("inventory", "chunks")
        for p in pipeline.lake.files(t)
    }
    assert not names & set(doomed_ids)
    assert len({os.path.basename(p) for p in pipeline.lake.files("inventory")}) == len(remaining)
