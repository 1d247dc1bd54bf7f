"""A hostile document costs only itself: parsing runs in a worker with time and memory limits."""

import time

import pytest

from ingest_pipeline.runtime.isolation import ParseLimitExceeded, ParseWorker, kept_worker
from ingest_pipeline.storage.catalog import query
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


def _open_pdf(content):
    import pypdfium2

    return len(pypdfium2.PdfDocument(content))


def test_a_calls_own_memory_limit_names_itself_even_when_a_library_cannot_load_under_it():
    from ingest_pipeline_tests.conftest import pdf_bytes

    worker = ParseWorker(timeout=60, memory_bytes=None)
    try:  # a fresh worker has not loaded PDFium: under 1 MiB its shared object cannot map
        with pytest.raises(ParseLimitExceeded, match="limit of 1 MiB"):
            worker.call(_open_pdf, pdf_bytes([["one page"]]), memory_bytes=2**20)
        assert worker.call(_open_pdf, pdf_bytes([["one page"]])) == 1  # the worker's own limit again
    finally:
        worker.close()


def test_a_hanging_or_greedy_chunker_costs_only_its_document(data_dir, sample_sources, tmp_path, monkeypatch):
    site = install_distribution(
        tmp_path / "site", "acme_hostile", HOSTILE_SOURCE, {"hostile": "acme_hostile:Hostile"}
    )
    monkeypatch.syspath_prepend(str(site))
    write(data_dir / "ingest_pipeline.toml", "[limits]\nparse_timeout = 15\nparse_memory_mib = 1536\n")
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    result = run_batch(pipeline, instance, register(pipeline, instance))
    assert result.success
    errors = {
        r["path"]: r["reason"]
        for r in query(
            pipeline.lake, "select path, reason from errors where stage = 'chunks/hostile@1'"
        ).to_pylist()
    }
    assert "longer than 15 s" in errors["maintenance_notes.txt"]
    assert "memory" in errors["supplier_prices.csv"]
    chunked = {
        r["path"]: r["chunker"]
        for r in query(
            pipeline.lake, "select distinct path, chunker from chunks where profile = 'default'"
        ).to_pylist()
    }
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
        "from ingest_pipeline.runtime.isolation import ParseWorker\n"
        "if __name__ == '__main__':\n"
        "    w = ParseWorker(timeout=60, memory_bytes=None)\n"
        "    w.call(os.getpid)\n"
        "    print(w.pids()[0], flush=True)\n"
        "    w.call(time.sleep, 300)\n"
    )  # the worker is busy when its owner is killed
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
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.runtime import isolation
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


def test_the_parse_worker_resource_gives_a_step_more_workers_and_stops_them_all():
    from dagster import build_init_resource_context

    from ingest_pipeline.resources import ParseWorkerResource
    from ingest_pipeline_tests.dagster_dev import alive

    resource = ParseWorkerResource(timeout=60, memory_mib=0)
    first, second = resource.workers(2)
    assert resource.workers(2) == [first, second] and resource.workers(1) == [first]
    pids = {first.call(_pid), second.call(_pid)}
    assert len(pids) == 2 and all(alive(p) for p in pids)
    resource.teardown_after_execution(build_init_resource_context())
    deadline = time.monotonic() + 10
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids)
    assert len(ParseWorkerResource(timeout=0, memory_mib=0).workers(2)) == 1  # in process: one


def test_the_pages_step_reads_documents_side_by_side_and_a_corrupt_one_fails_alone(data_dir, monkeypatch):
    from ingest_pipeline import stages
    from ingest_pipeline_tests.conftest import pdf_bytes

    texts = {
        f"report_{i}.pdf": [[f"Report {i} page {p} says the figures were checked."] for p in (1, 2)]
        for i in range(5)
    }
    for name, pages in texts.items():
        write(data_dir / "sources" / name, pdf_bytes(pages))
    write(
        data_dir / "sources" / "report_broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\n%%EOF garbage"
    )
    read_by: dict[str, int] = {}
    read_document = stages.read_document

    def watched(settings, store, document, run_id, parser=None, force=False):
        try:
            return read_document(settings, store, document, run_id, parser, force)
        finally:
            read_by[document] = parser.pids()[0] if parser.pids() else -1

    monkeypatch.setattr(stages, "read_document", watched)
    from ingest_pipeline.settings import available_cpus, load_settings

    assert load_settings(str(data_dir)).read_workers == min(2, available_cpus())  # the default
    write(data_dir / "ingest_pipeline.toml", "[limits]\nread_workers = 2\n")
    pipeline = fresh_pipeline(data_dir)
    instance = temporary_instance(data_dir)
    keys = register(pipeline, instance)
    # as the CLI runs it: one worker kept for the whole run, borrowed by every step; the
    # reading threads end with the pages step, and the kept worker must outlive them
    with kept_worker(pipeline.settings.parse_timeout, pipeline.settings.parse_memory_bytes) as kept:
        result = run_batch(pipeline, instance, keys)
        assert kept.started
    assert result.success and len(read_by) == 6
    assert len(set(read_by.values()) - {-1}) == 2  # two worker processes, each reading its share
    pages = {
        (r["path"], r["page"]): r["text"]
        for r in query(
            pipeline.lake,
            "select s.path, p.page, p.text from pages p join sources s using (document_id) "
            "where p.status = 'read'",
        ).to_pylist()
    }
    assert {k[0] for k in pages} == set(texts)
    for name, doc in texts.items():
        for number, lines in enumerate(doc, start=1):
            assert pages[(name, number)].strip() == lines[0]
    errors = query(pipeline.lake, "select path from errors where stage = 'pages'").to_pylist()
    assert [r["path"] for r in errors] == ["report_broken.pdf"]
    chunked = query(pipeline.lake, "select distinct path from chunks where profile = 'retrieval'").to_pylist()
    assert {r["path"] for r in chunked} == set(texts)  # the later steps still had their worker
    assert not query(pipeline.lake, "select * from errors where stage like 'chunks/%'").to_pylist()


def test_the_worker_collects_garbage_less_often_than_python_would():
    import gc

    from ingest_pipeline.runtime.collector import FIRST_GENERATION

    worker = ParseWorker(timeout=60, memory_bytes=None)
    try:
        first, second, third = worker.call(gc.get_threshold)
    finally:
        worker.close()
    assert first == FIRST_GENERATION > 700  # a spawned interpreter starts at (700, 10, 10)
    assert (second, third) == (10, 10)


def test_fewer_collections_only_ever_raises_the_first_threshold():
    import gc

    from ingest_pipeline.runtime.collector import FIRST_GENERATION, fewer_collections

    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        fewer_collections()
        assert gc.get_threshold() == (FIRST_GENERATION, 10, 10)
        gc.set_threshold(4 * FIRST_GENERATION, 5, 3)  # a higher setting someone chose stays
        fewer_collections()
        assert gc.get_threshold() == (4 * FIRST_GENERATION, 5, 3)
        gc.set_threshold(0, 10, 10)  # a collector switched off stays off
        fewer_collections()
        assert gc.get_threshold() == (0, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_every_batch_asset_raises_the_threshold_of_the_process_that_runs_it():
    import gc
    from types import SimpleNamespace

    from dagster import AssetKey

    from ingest_pipeline.assets.common import for_each_document
    from ingest_pipeline.runtime.collector import FIRST_GENERATION

    context = SimpleNamespace(asset_key=AssetKey("probe"))  # all it reads when there is no document
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)  # as a run process the daemon launched starts
        assert for_each_document(context, [], lambda key: None) == []
        assert gc.get_threshold() == (FIRST_GENERATION, 10, 10)
    finally:
        gc.set_threshold(*before)
