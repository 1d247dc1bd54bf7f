"""The whole ingest of a PDF folder (default: FinanceBench dev, 21 filings) beside the plain
pipeline and the bare model, in one run, each phase in a fresh process of its own.

    .venv/bin/python bench/passages_bench.py [--pdfs DIR] [--keep DIR] [--config TOML]

Phases (run one after another, so they do not share the two cores):

- ``ingest``: ``ingest-pipeline ingest`` over the PDFs into a fresh storage root with the
  project's ``data/ingest_pipeline.toml`` (the served profile embedded and indexed, every
  profile's chunk map and the claims of every chunker version the profiles use);
- ``plain``: pypdfium2 page text -> LangChain's RecursiveCharacterTextSplitter(1000) -> the
  same MiniLM ONNX session, length-sorted batches of 16 -> LanceDB with a full-text index;
- ``bare``: the bare model (tokenizer + ONNX sessions, length-sorted batches, the ingest's
  own model settings) embedding the served profile's distinct embedding texts, nothing else.

The plain pipeline runs twice, first and last (``plain``, ``plain_again``): the machine's
speed drifts over the half hour a run takes, and the ingest is compared with the mean of the
two (each pair is quoted too).

Prints seconds, pages/s and peak memory (VmHWM of the phase's process plus the largest peak
of its children, the parse worker, read from /proc while they live) of each, the two target
ratios, and where the ingest's time went: Dagster step durations summed per asset, the CPU
time of the phase's process tree, and the CPU time of the model's own calls (the threads
that ran the ONNX sessions: all of the model's work with one-thread sessions, as the ingest
and the bare phase run them), so CPU time minus the model's is the rest of the pipeline.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)

DEFAULT_PDFS = ROOT.parent / "shared" / "qa" / "financebench-dev" / "pdfs"


def _hwm_kib(pid: int | str = "self") -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            return next((int(line.split()[1]) for line in handle if line.startswith("VmHWM:")), 0)
    except OSError:
        return 0


class ChildPeaks:
    """Each child process's own peak (VmHWM), read from /proc once a second while it lives:
    often enough for the parse worker, which lives the whole run (and VmHWM only grows),
    rarely enough to cost the measured process little (polling every 250 ms, py-spy found
    this thread busy for about 9 s of a profiled FinanceBench ingest).

    ``getrusage(RUSAGE_CHILDREN).ru_maxrss`` cannot stand for a child's memory here: Python
    starts subprocesses with vfork, and a vforked child borrows its parent's address space
    until it calls exec, so a two-megabyte ``tail`` (Dagster's compute-log capture starts
    them for every in-process run) is charged with the parent's whole resident size at the
    moment it was started. After exec a process has memory of its own with a fresh
    high-water mark, so the last value read for each child is its real peak."""

    def __init__(self) -> None:
        import threading

        self.last: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _children(self) -> list[int]:
        return self._children_of(os.getpid())

    @staticmethod
    def _children_of(root: int) -> list[int]:
        found, todo = [], [root]
        while todo:
            pid = todo.pop()
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as handle:
                        kids = [int(k) for k in handle.read().split()]
                    found += kids
                    todo += kids
            except OSError:
                continue
        return found

    def _watch(self) -> None:
        while not self._stop.wait(1.0):
            for pid in self._children():
                hwm = _hwm_kib(pid)
                if hwm:
                    self.last[pid] = hwm

    def stop(self) -> float:
        """Stop watching; the largest peak of any one child, in MiB."""
        self._stop.set()
        self._thread.join()
        return max(self.last.values(), default=0) / 1024


def _peak_mib(largest_child_mib: float = 0.0) -> float:
    """Peak resident memory of this process (VmHWM) plus the largest peak of any one of its
    child processes (the parse worker), whether or not the two peaks were at the same time."""
    return round(_hwm_kib() / 1024 + largest_child_mib, 1)


def _tree_cpu() -> float:
    """CPU seconds (user + system) of this process, its reaped children and its live
    descendants so far."""
    import resource

    mine = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = mine.ru_utime + mine.ru_stime + reaped.ru_utime + reaped.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for pid in ChildPeaks._children_of(os.getpid()):
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / tick  # utime stime cutime cstime
    return total


def _model_cpu() -> dict:
    """The usage of every local model this process made (``embedding.registry``), summed."""
    from ingest_pipeline.embedding.registry import made

    total: dict = {}
    for model in made():
        for key, value in (model.usage() if hasattr(model, "usage") else {}).items():
            total[key] = total.get(key, 0) + value
    return total


def _spent(before_cpu: float, before_model: dict) -> dict:
    model = {k: v - before_model.get(k, 0) for k, v in _model_cpu().items()}
    cpu = _tree_cpu() - before_cpu
    return {
        "cpu_seconds": round(cpu, 1),
        "model_cpu_seconds": round(model.get("thread_cpu_seconds", 0.0), 1),
        "model_tokens": int(model.get("tokens", 0)),
        "model_padded_tokens": int(model.get("padded_tokens", 0)),
    }


def _pdfs(folder: str) -> list[str]:
    return sorted(str(p) for p in Path(folder).glob("*.pdf"))


def phase_plain(pdfs: list[str], work: str) -> dict:
    import lancedb
    import pyarrow as pa
    import pypdfium2 as pdfium
    from lancedb.index import FTS
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from ingest_pipeline.embedding.minilm import MiniLMEmbedder

    embedder = MiniLMEmbedder(batch_size=16)
    embedder.embed(["warm up"])
    cpu_before, model_before = _tree_cpu(), embedder.usage()
    started = time.perf_counter()
    splitter = RecursiveCharacterTextSplitter(chunk_size=1000)
    texts, where, pages = [], [], 0
    for path in pdfs:
        pdf = pdfium.PdfDocument(path)
        try:
            for index in range(len(pdf)):
                page = pdf[index]
                textpage = page.get_textpage()
                text = textpage.get_text_range()
                textpage.close()
                page.close()
                pages += 1
                for piece in splitter.split_text(text):
                    if piece.strip():
                        texts.append(piece)
                        where.append((Path(path).name, index + 1))
        finally:
            pdf.close()
    parsed = time.perf_counter()
    vectors = embedder.embed(texts)
    embedded = time.perf_counter()
    db = lancedb.connect(os.path.join(work, "plain-lancedb"))
    table = db.create_table(
        "chunks",
        data=pa.table(
            {
                "path": [w[0] for w in where],
                "page": [w[1] for w in where],
                "text": texts,
                "vector": pa.array(vectors.tolist(), type=pa.list_(pa.float32(), embedder.dim)),
            }
        ),
        mode="overwrite",
    )
    table.create_index("text", config=FTS(), replace=True)
    done = time.perf_counter()
    cpu = round(_tree_cpu() - cpu_before, 1)  # the model's own share is not separable here: its
    # session runs on onnxruntime's thread pool, which the calling thread's CPU time leaves out
    tokens = embedder.usage()["tokens"] - model_before["tokens"]
    return {
        "pages": pages,
        "chunks": len(texts),
        "seconds": round(done - started, 2),
        "cpu_seconds": cpu,
        "model_tokens": tokens,
        "parse_split_seconds": round(parsed - started, 2),
        "embed_seconds": round(embedded - parsed, 2),
        "lancedb_seconds": round(done - embedded, 2),
        "peak_mib": _peak_mib(),
    }


def phase_ingest(pdfs_dir: str, data: str) -> dict:
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.storage.catalog import query

    children = ChildPeaks()
    p = parts_for(data)
    p.embedder.embed(["warm up"])
    cpu_before, model_before = _tree_cpu(), _model_cpu()
    started = time.perf_counter()
    report = ingest(p, [pdfs_dir])
    seconds = time.perf_counter() - started
    spent = _spent(cpu_before, model_before)
    largest_child = children.stop()
    pages = query(p.lake, "select count(*) as n from pages").to_pylist()[0]["n"]
    served = p.settings.default_profile
    counts = query(
        p.lake, "select profile, count(*) as n from chunks group by profile order by profile"
    ).to_pylist()
    return {
        "documents": report.documents,
        "failed": len(report.failed),
        "pages": pages,
        "seconds": round(seconds, 2),
        **spent,
        "texts_embedded": report.texts_embedded,
        "chunks_per_profile": {r["profile"]: r["n"] for r in counts},
        "served": served,
        "where_time_goes": _step_seconds(data, report.run_ids),
        "peak_mib": _peak_mib(largest_child),
        "peak_parts_mib": {"run_process": _peak_mib(), "largest_child": round(largest_child, 1)},
    }


def _step_seconds(data: str, run_ids: list[str]) -> dict:
    from ingest_pipeline.instance.home import instance_for

    instance = instance_for(os.path.join(data, "dagster_home"))
    totals: dict[str, float] = {}
    for run_id in run_ids:
        for step in instance.get_run_step_stats(run_id):
            if step.start_time and step.end_time:
                key = step.step_key.split("[")[0]
                totals[key] = totals.get(key, 0.0) + step.end_time - step.start_time
    return {k: round(v, 1) for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def phase_bare(data: str) -> dict:
    """The served profile's distinct embedding texts through the model alone (tokenizer and
    ONNX sessions, length-sorted batches), run as the ingest runs it (the served profile's
    embedder with its settings' ``embed_batch``, ``embed_workers``, ``embed_threads``)."""
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.storage.catalog import query

    p = parts_for(data)
    served = p.settings.default_profile
    texts = sorted(
        {
            r["t"]
            for r in query(
                p.lake,
                "select coalesce(embed_text, text) as t from chunks where profile = ? and text is not null",
                [served],
            ).to_pylist()
        }
    )
    s = p.settings
    model = p.embedder.for_profile(served)  # the served profile's own embedder, as the ingest ran it
    model.embed(["warm up"])
    tokens = sum(min(n, model.max_tokens) for n in model.count_tokens(texts))
    cpu_before, model_before = _tree_cpu(), model.usage()
    started = time.perf_counter()
    model.embed(texts)
    seconds = time.perf_counter() - started
    used = model.usage()
    return {
        "texts": len(texts),
        "tokens": tokens,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(_tree_cpu() - cpu_before, 1),
        "model_cpu_seconds": round(used["thread_cpu_seconds"] - model_before["thread_cpu_seconds"], 1),
        "embedder": model.ref,
        "batch": s.embed_batch,
        "workers": s.embed_workers,
        "threads": s.embed_threads or "onnxruntime default",
        "peak_mib": _peak_mib(),
    }


def _run_phase(name: str, args: argparse.Namespace, data: str, work: str) -> dict:
    cmd = [sys.executable, __file__, "--phase", name, "--pdfs", args.pdfs, "--data", data, "--work", work]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pdfs", default=str(DEFAULT_PDFS))
    parser.add_argument("--keep", help="folder to keep the storage roots in (default: a temporary one)")
    parser.add_argument(
        "--config",
        default=str(ROOT / "data" / "ingest_pipeline.toml"),
        help="the storage root's settings ('' for none: a fresh root's built-in profiles)",
    )
    parser.add_argument(
        "--out", help="also write the report to this JSON file (e.g. bench/results/passages.json)"
    )
    parser.add_argument("--phase", choices=("plain", "ingest", "bare"))
    parser.add_argument("--data")
    parser.add_argument("--work")
    args = parser.parse_args()
    if args.phase == "plain":
        print(json.dumps(phase_plain(_pdfs(args.pdfs), args.work)))
        return 0
    if args.phase == "ingest":
        print(json.dumps(phase_ingest(args.pdfs, args.data)))
        return 0
    if args.phase == "bare":
        print(json.dumps(phase_bare(args.data)))
        return 0

    work = args.keep or tempfile.mkdtemp(prefix="passages-bench-")
    data = os.path.join(work, "data")
    shutil.rmtree(data, ignore_errors=True)
    os.makedirs(os.path.join(data, "sources"))
    kept = bool(args.config and Path(args.config).exists())
    if kept:
        shutil.copy(args.config, os.path.join(data, "ingest_pipeline.toml"))
    results = provenance()
    results["config"] = os.path.relpath(args.config, ROOT) if kept else "none (the built-in profiles)"
    for name, phase in (("plain", "plain"), ("ingest", "ingest"), ("bare", "bare"), ("plain_again", "plain")):
        print(f"phase {name}…", file=sys.stderr, flush=True)
        results[name] = _run_phase(phase, args, data, work)
    ingest, bare = results["ingest"], results["bare"]
    plains = [results["plain"], results["plain_again"]]
    plain_seconds = sum(p["seconds"] for p in plains) / len(plains)

    def pages_ratio(seconds: float) -> float:  # the same PDFs, so pages per second compare as times
        return round((ingest["pages"] / ingest["seconds"]) / (plains[0]["pages"] / seconds), 3)

    results["ratios"] = {
        "ingest_over_bare_served_embedding": round(ingest["seconds"] / bare["seconds"], 3),
        "pages_per_second_over_plain": pages_ratio(plain_seconds),
        "pages_per_second_over_plain_first": pages_ratio(plains[0]["seconds"]),
        "pages_per_second_over_plain_last": pages_ratio(plains[1]["seconds"]),
        "peak_memory_over_plain": round(ingest["peak_mib"] / min(p["peak_mib"] for p in plains), 3),
        # CPU time is steadier than wall time when the machine's speed drifts
        "ingest_cpu_over_bare_cpu": round(ingest["cpu_seconds"] / bare["cpu_seconds"], 3),
        "ingest_model_cpu_over_bare_model_cpu": round(
            ingest["model_cpu_seconds"] / bare["model_cpu_seconds"], 3
        ),
        "ingest_cpu_besides_the_model_seconds": round(ingest["cpu_seconds"] - ingest["model_cpu_seconds"], 1),
    }
    results["machine"] = {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(json.dumps(results, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
