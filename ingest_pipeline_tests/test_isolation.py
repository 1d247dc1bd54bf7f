"""A hostile document costs only itself: parsing runs in a worker with time and memory limits."""

import time

import pytest

from ingest_pipeline.catalog import query
from ingest_pipeline.isolation import ParseLimitExceeded, ParseWorker
from ingest_pipeline_tests.chunker_doubles import install_distribution
from ingest_pipeline_tests.conftest import write
from ingest_pipeline_tests.dagster_helpers import fresh_pipeline, register, run_batch, temporary_instance

HOSTILE_SOURCE = '''
import time

from ingest_pipeline.contract import ChunkPiece, PageChunks


class Hostile:
    """Hangs on plain text, eats memory on CSV, answers everything else."""

    id = "hostile"
    version = 1

    def chunk(self, content, media_type, pages):
        if media_type == "text/plain":
            time.sleep(120)
        if media_type == "text/csv":
            hog = bytearray(4 * 1024 ** 3)
            hog[-1] = 1
        return ()
'''


def _sleep(seconds):
    time.sleep(seconds)
    return seconds


def _allocate(n):
    return len(bytearray(n))


def test_the_worker_stops_a_call_over_time_and_recovers():
    # Generous limits: a loaded machine must not make the quick calls exceed them. The
    # bound below tells a stopped call (about 10 s) from one run to its end (600 s).
    worker = ParseWorker(timeout=10, memory_bytes=None)
    try:
        assert worker.call(_sleep, 0) == 0
        started = time.perf_counter()
        with pytest.raises(ParseLimitExceeded, match="longer than 10 s"):
            worker.call(_sleep, 600)
        assert time.perf_counter() - started < 300
        assert worker.call(_sleep, 0) == 0  # a fresh worker took over
    finally:
        worker.close()


def test_the_worker_refuses_memory_over_its_limit():
    worker = ParseWorker(timeout=60, memory_bytes=1024 * 2**20)
    try:
        with pytest.raises(ParseLimitExceeded, match="memory"):
            worker.call(_allocate, 3 * 1024**3)
        assert worker.call(_allocate, 1024) == 1024
    finally:
        worker.close()


def test_a_hanging_or_greedy_chunker_costs_only_its_document(data_dir, sample_sources, tmp_path, monkeypatch):
    site = install_distribution(tmp_path / "site", "acme_hostile", HOSTILE_SOURCE, {"hostile": "acme_hostile:Hostile"})
    monkeypatch.syspath_prepend(str(site))
    write(data_dir / "ingest_pipeline.toml", "[limits]\nparse_timeout = 15\nparse_memory_mib = 1536\n")
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    result = run_batch(pipeline, instance, register(pipeline, instance))
    assert result.success
    errors = {r["path"]: r["reason"] for r in query(
        pipeline.lake, "select path, reason from errors where stage = 'chunks/hostile@1'").to_pylist()}
    assert "longer than 15 s" in errors["maintenance_notes.txt"]
    assert "memory" in errors["supplier_prices.csv"]
    chunked = {r["path"]: r["chunker"] for r in query(
        pipeline.lake, "select distinct path, chunker from chunks where profile = 'default'").to_pylist()}
    assert chunked["maintenance_notes.txt"] == "page@1" and chunked["supplier_prices.csv"] == "page@1"
    assert len({r for r in chunked}) == 4  # every document still has its chunks


def _pid():
    import os

    return os.getpid()


def test_the_parse_worker_resource_stops_its_worker_when_the_step_ends():
    from dagster import build_init_resource_context

    from ingest_pipeline.resources import ParseWorkerResource
    from ingest_pipeline_tests.dagster_dev import alive

    resource = ParseWorkerResource(timeout=60, memory_mib=0)
    worker = resource.worker()
    pid = worker.call(_pid)
    assert alive(pid) and worker.pids() == [pid]
    resource.teardown_after_execution(build_init_resource_context())
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(pid) and not worker.started


def test_a_parse_worker_dies_with_the_process_it_serves(tmp_path):
    """SIGKILL the process that owns a busy worker: the kernel ends the worker too
    (PR_SET_PDEATHSIG), instead of letting it parse on for minutes."""
    import os
    import signal
    import subprocess
    import sys

    from ingest_pipeline_tests.dagster_dev import alive

    script = tmp_path / "owner.py"
    script.write_text(
        "import os, time\n"
        "from ingest_pipeline.isolation import ParseWorker\n"
        "if __name__ == '__main__':\n"
        "    w = ParseWorker(timeout=60, memory_bytes=None)\n"
        "    w.call(os.getpid)\n"
        "    print(w.pids()[0], flush=True)\n"
        "    w.call(time.sleep, 300)\n")  # the worker is busy when its owner is killed
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    worker_pid = None
    try:
        worker_pid = int(owner.stdout.readline())
        assert alive(worker_pid)
        time.sleep(1)  # the long call has reached the worker
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
        deadline = time.monotonic() + 20
        while alive(worker_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(worker_pid)
    finally:
        if owner.poll() is None:
            owner.kill()
        if worker_pid is not None and alive(worker_pid):  # the test failed: leave no orphan behind
            os.kill(worker_pid, signal.SIGKILL)


def test_the_runs_of_one_ingest_share_one_parse_worker_that_stops_when_the_ingest_ends(data_dir, monkeypatch):
    """The CLI runs its batches back to back in one process: one worker parses for all of
    them (not a fresh interpreter per run), and none is left when ``ingest`` returns."""
    from ingest_pipeline import isolation
    from ingest_pipeline.runner import ingest
    from ingest_pipeline_tests.conftest import write
    from ingest_pipeline_tests.dagster_dev import alive
    from ingest_pipeline_tests.dagster_helpers import fresh_pipeline

    for i in range(3):
        write(data_dir / "sources" / f"note_{i}.md", f"# Note {i}\n\nThe greenhouse heating, part {i}.\n")
    pids, started = set(), []
    original_call, original_executor = isolation.ParseWorker.call, isolation.ParseWorker._executor

    def call(self, fn, *args):
        value = original_call(self, fn, *args)
        pids.update(self.pids())
        return value

    def executor(self):
        if self._pool is None:
            started.append(self)
        return original_executor(self)

    monkeypatch.setattr(isolation.ParseWorker, "call", call)
    monkeypatch.setattr(isolation.ParseWorker, "_executor", executor)
    report = ingest(fresh_pipeline(data_dir), batch_size=1)
    assert len(report.run_ids) == 3 and not report.failed
    assert len(started) == 1 and len(pids) == 1
    assert isolation.kept(60, None) is None and not isolation._KEPT
    deadline = time.monotonic() + 10
    while alive(next(iter(pids))) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(next(iter(pids)))
