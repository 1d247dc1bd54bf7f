"""Peak memory of a text file at its size limit, and of refusing one over it.

In a fresh subprocess per case, with the parse worker as a run uses it: observe_source,
read_document and the page@1 chunker on a generated text file of ``--mib`` MiB (the
default text limit), then observe_source on a 200 MiB file (refused before loading).
Prints, per case, the run process's peak RSS growth (VmHWM minus its baseline after
imports) and the parse worker's peak (VmHWM), each also as a ratio to the file size.

    .venv/bin/python bench/limits_bench.py [--mib 16]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MiB = 1024 * 1024

_CASE = r"""
import json, os, sys
from ingest_pipeline.documents import collect
from ingest_pipeline.runtime.isolation import ParseWorker
from ingest_pipeline.registry import ChunkerRegistry
from ingest_pipeline.readers import reader_ids
from ingest_pipeline.settings import load_settings
from ingest_pipeline.stages import guarded, observe_source, read_document, run_chunker
from ingest_pipeline.storage.store import Store

def hwm(pid="self"):
    return next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM")) * 1024

def worker_hwm():
    return max(hwm(p.pid) for p in worker._pool._processes.values())

data, full = sys.argv[1], sys.argv[2] == "1"
settings = load_settings(data)
store = Store.at(settings.lake_root)
worker = ParseWorker(settings.parse_timeout, settings.parse_memory_bytes)
registry = ChunkerRegistry.discover(reserved_ids=reader_ids())
entry = collect(settings, [settings.source_root])[0]
store.save_inventory([entry])
doc = entry.document_id
base = hwm()
out = {"sources": guarded(store, "sources", doc, "b", observe_source, settings, store, doc, "b").status}
if full:
    out["pages"] = guarded(store, "pages", doc, "b", read_document, settings, store, doc, "b", worker).status
    chunker = registry.get("page@1")
    out["page@1"] = run_chunker(settings, store, chunker, registry.info(chunker), doc, "b", worker).status
    out["worker_peak"] = worker_hwm()
out["run_growth"] = hwm() - base
worker.close()
print(json.dumps(out))
"""


def _write_text(path: Path, size: int) -> None:
    line = b"The greenhouse log records temperature, humidity and the vents' position every hour.\n"
    block = line * (MiB // len(line) + 1)
    with open(path, "wb") as handle:
        left = size
        while left > 0:
            handle.write(block[:left])
            left -= min(len(block), left)


def measure(size: int, full: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        (data / "sources").mkdir(parents=True)
        _write_text(data / "sources" / "log.txt", size)
        out = subprocess.run(
            [sys.executable, "-c", _CASE, str(data), "1" if full else "0"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        if out.returncode:
            raise SystemExit(out.stderr[-3000:])
        return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mib", type=float, default=16)
    args = parser.parse_args()
    at_limit = int(args.mib * MiB) - 1
    rows = {
        "at_limit": (at_limit, measure(at_limit, True)),
        "refused_200mib": (200 * MiB, measure(200 * MiB, False)),
    }
    for name, (size, result) in rows.items():
        stages = ", ".join(f"{k}={v}" for k, v in result.items() if isinstance(v, str))
        line = f"{name}: {size / MiB:.1f} MiB file, stages {stages}; "
        line += (
            f"run process +{result['run_growth'] / MiB:.1f} MiB ({result['run_growth'] / size:.2f}x the file)"
        )
        if "worker_peak" in result:
            peak = result["worker_peak"]
            line += f", parse worker peak {peak / MiB:.1f} MiB ({peak / size:.2f}x)"
        print(line)


if __name__ == "__main__":
    main()
