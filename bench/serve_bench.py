"""Search latency: ``serve`` (model and tables loaded once) beside the command line (both loaded
on every call), on one storage root, in one run.

    .venv/bin/python bench/serve_bench.py --root DIR [--questions N] [--cli-calls N]
                                          [--out bench/results/serve.json]

The questions are those of FinanceBench dev and more (the root should hold their filings, as
the crowd root of bench/search_bench.py does). Each is asked of ``GET /api/search`` (k = 5,
results grouped by page, the service's defaults) after one warm-up request; the anchor is
``ingest-pipeline search`` run as a user runs it, one process per question. Reported: median,
p95 and max seconds of each, the root's pages and chunks, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from result_keys import provenance  # noqa: E402  (bench/, this script's folder, is on sys.path)

QA = ROOT.parent / "shared" / "qa"
CLI = str(ROOT / ".venv" / "bin" / "ingest-pipeline")


def questions() -> list[str]:
    found = []
    for folder in ("financebench-dev", "financebench-more"):
        with open(QA / folder / "questions.jsonl") as handle:
            found += [json.loads(line)["question"] for line in handle if line.strip()]
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


def summary(seconds: list[float]) -> dict:
    return {
        "calls": len(seconds),
        "median_s": round(statistics.median(seconds), 4),
        "p95_s": round(percentile(seconds, 0.95), 4),
        "max_s": round(max(seconds), 4),
    }


def served(root: str, asked: list[str]) -> dict:
    port = free_port()
    process = subprocess.Popen(
        [CLI, "--data", root, "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    try:
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/documents", timeout=5).read()
                break
            except OSError:
                if process.poll() is not None or time.perf_counter() - started > 300:
                    raise SystemExit(f"serve did not start: {process.stderr.read().decode()[-2000:]}")
                time.sleep(0.2)
        ready = time.perf_counter() - started
        urllib.request.urlopen(f"{url}/api/search?q=warm", timeout=120).read()
        seconds = []
        for question in asked:
            began = time.perf_counter()
            body = urllib.request.urlopen(
                f"{url}/api/search?{urllib.parse.urlencode({'q': question})}", timeout=120
            )
            json.loads(body.read())
            seconds.append(time.perf_counter() - began)
        return {"startup_s": round(ready, 2), **summary(seconds)}
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=60)


def command_line(root: str, asked: list[str]) -> dict:
    seconds = []
    for question in asked:
        began = time.perf_counter()
        subprocess.run([CLI, "--data", root, "search", question, "--json"], capture_output=True, check=True)
        seconds.append(time.perf_counter() - began)
    return summary(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--questions", type=int, default=0, help="ask only the first N (default all)")
    parser.add_argument("--cli-calls", type=int, default=10, help="questions asked through the CLI")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "serve.json"))
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    asked = questions()[: args.questions or None]
    sys.path.insert(0, str(ROOT))
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline.storage.catalog import query

    parts = parts_for(root)
    size = query(parts.lake, "select count(*) as pages from pages").to_pylist()[0]
    chunks = parts.index.count(parts.settings.default_profile)
    serve = served(root, asked)
    cli = command_line(root, asked[: args.cli_calls])
    out = {
        **provenance(),
        "root": {"pages": size["pages"], "served_chunks": chunks},
        "serve": serve,
        "cli": cli,
        "ratios": {"cli_median_over_serve_median": round(cli["median_s"] / serve["median_s"], 2)},
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
