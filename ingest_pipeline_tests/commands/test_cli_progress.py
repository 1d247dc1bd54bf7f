"""``ingest``'s progress and summary: redirected (plain lines) and under a pseudo-terminal
(a table redrawn in place, colour), on a nested folder with a failed, a changed and
unchanged documents."""

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ingest_pipeline.commands.ingest import IngestReport
from ingest_pipeline.commands.summary import build_tree, summary_text, tree_lines
from ingest_pipeline.runtime.progress import DocumentEvent, StageBoard
from ingest_pipeline.samples import simple_pdf
from ingest_pipeline_tests.conftest import write

CLI = str(Path(sys.executable).parent / "ingest-pipeline")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STAGES = ("Reading", "Chunking", "Embedding", "Indexing")


def run_in_pty(args: list[str], timeout: int = 900) -> tuple[int, str]:
    """Run a command with stdin/stdout/stderr on a pseudo-terminal; its whole output."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        args,
        stdin=follower,
        stdout=follower,
        stderr=follower,
        close_fds=True,
        env={**os.environ, "COLUMNS": "120", "TERM": "xterm-256color"},
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=timeout), b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    data = tmp_path_factory.mktemp("progress") / "data"
    src = data / "sources"
    write(src / "garden" / "deep" / "notes.txt", "Oil the greenhouse door hinges every spring.\n")
    write(
        src / "garden" / "report.pdf",
        simple_pdf([["Tomato yield rose this year."], ["Page two of the report."]]),
    )
    write(src / "broken" / "bad.pdf", b"%PDF-1.4 this is not a PDF body")
    write(src / "top.txt", "First version of the top note.\n")
    first = subprocess.run([CLI, "--data", str(data), "ingest"], capture_output=True, text=True, timeout=900)
    write(src / "top.txt", "Second version of the top note, longer.\n")
    code, second = run_in_pty([CLI, "--data", str(data), "ingest", "--depth", "2"])
    third = subprocess.run(
        [CLI, "--data", str(data), "ingest", "--json"], capture_output=True, text=True, timeout=900
    )
    return first, code, second, third, data


def test_redirected_ingest_prints_plain_lines_per_document_and_stage(two_runs):
    first, *_ = two_runs
    assert first.returncode == 0, first.stderr[-3000:]
    assert "\x1b" not in first.stderr + first.stdout  # no colour, no cursor movement
    assert "Traceback" not in first.stderr + first.stdout
    lines = first.stderr.splitlines()
    assert "4 documents: Reading → Chunking → Embedding → Indexing" in lines
    progress = [line.split() for line in lines if line.split() and line.split()[0] in STAGES]
    for stage in STAGES:  # every document reaches every column, counted one by one
        counts = [p[1] for p in progress if p[0] == stage]
        assert counts == ["1/4", "2/4", "3/4", "4/4"], (stage, counts)
    bad = [p for p in progress if "broken/bad.pdf" in p]
    assert bad[0][:4] == ["Reading", bad[0][1], "broken/bad.pdf", "failed:"] and "pages:" in bad[0]
    assert all(p[3] == "skipped" for p in bad[1:])
    report_pdf = next(p for p in progress if p[0] == "Reading" and p[2] == "garden/report.pdf")
    assert report_pdf[3:] == ["new,", "2", "pages"]

    tree = first.stdout.splitlines()
    assert tree[:3] == ["broken/    1 failed", "garden/    2 new", "└── deep/  1 new"]
    assert "4 documents:  3 new  0 changed  0 cached  1 failed" in tree
    failure = [line for line in tree if line.startswith("failed")]
    assert len(failure) == 1 and "broken/bad.pdf  pages: " in failure[0] and "PDFium" in failure[0]


def test_ingest_on_a_terminal_redraws_a_stage_table_and_colours_the_tree(two_runs):
    _, code, output, *_ = two_runs
    assert code == 0, output[-3000:]
    assert "Traceback" not in output
    assert "\x1b[1A" in output or "\x1b[2K" in output  # the table is redrawn in place
    assert "\x1b[36m" in output and "\x1b[31m" in output  # cached in cyan, failed in red
    plain = ANSI.sub("", output).replace("\r", "")
    header = next(line for line in plain.splitlines() if "Reading" in line and "Indexing" in line)
    assert [header.index(s) for s in STAGES] == sorted(header.index(s) for s in STAGES)
    final = plain[plain.rindex("documents ") :]  # the last drawing of the table
    table = {line.split()[0]: line.split()[1:] for line in final.splitlines()[:6] if line.split()}
    assert table["documents"] == ["4/4"] * 4
    assert table["changed"] == ["1", "1", "1", "1"]  # top.txt, in every column
    assert table["cached"] == ["2", "2", "2", "2"]
    assert table["failed"] == ["1", "0", "0", "0"]

    after = final.splitlines()
    tree = after[next(i for i, line in enumerate(after) if line.startswith("broken/ ")) :]
    assert [" ".join(line.split()) for line in tree[:6]] == [
        "broken/ 1 failed",
        "└── bad.pdf 1 failed",
        "garden/ 2 cached",
        "├── deep/ 1 cached",  # notes.txt, one level too deep to be listed, still counted
        "└── report.pdf 1 cached",
        "top.txt 1 changed",
    ]
    assert "4 documents:  0 new  1 changed  2 cached  1 failed" in plain


def test_a_rerun_reports_its_own_counts_and_json_mode_draws_no_progress(two_runs):
    *_, third, data = two_runs
    assert third.returncode == 0, third.stderr[-3000:]
    assert "Reading" not in third.stderr and "\x1b" not in third.stderr
    report = json.loads(third.stdout)
    assert (report["new"], report["changed"], report["unchanged"], report["failed"]) == (0, 0, 3, 1)
    assert report["documents_by_status"]["failed"] == ["broken/bad.pdf"]
    vectors = json.loads(
        subprocess.run(
            [
                CLI,
                "--data",
                str(data),
                "query",
                "select count(*) as n from embeddings where profile = 'retrieval'",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        ).stdout
    )[0]["n"]
    # nothing was embedded again: every vector of the served profile's documents was reused
    assert report["texts_embedded"] == 0 and report["texts_from_cache"] == vectors > 0
    reading = next(s for s in report["stages"] if s["stage"] == "Reading")
    assert (reading["cached"], reading["failed"], reading["pages"]) == (3, 1, 4)


def _report(statuses: dict[str, str]) -> IngestReport:
    report = IngestReport(documents=len(statuses), paths={p: p for p in statuses}, profile="retrieval")
    for path, status in statuses.items():
        if status == "failed":
            report.failed[path] = [
                {"stage": "pages", "reason": "bad"},
                {"stage": "sources", "reason": "worse"},
            ]
        else:
            getattr(report, status).append(path)
    return report


def test_a_folder_counts_everything_below_it_and_a_failed_document_only_as_failed():
    report = _report(
        {
            "a/b/c/one.pdf": "new",
            "a/b/two.pdf": "failed",
            "a/three.md": "unchanged",
            "a/b/c/four.txt": "changed",
            "z.txt": "new",
        }
    )
    root = build_tree((p, report.status_of(p)) for p in report.paths)
    lines = {name.strip("│├└─ "): dict(counts) for name, counts in tree_lines(root)}
    assert lines == {
        "a/": {"new": 1, "failed": 1, "cached": 1, "changed": 1},
        "b/": {"new": 1, "failed": 1, "changed": 1},
        "c/": {"new": 1, "changed": 1},
    }
    assert [n.strip("│├└─ ") for n, _ in tree_lines(root, depth=1)] == ["a/", "z.txt"]
    text = summary_text(report).plain
    assert "5 documents:  2 new  1 changed  1 cached  1 failed" in text
    assert text.count("a/b/two.pdf") == 2  # one line per failure, with stage and reason
    assert "failed   a/b/two.pdf  pages: bad" in text


def test_the_stage_board_counts_a_document_done_when_every_asset_of_its_column_finished():
    board = StageBoard(2, ["sources", "pages", "chunks/pdf_v1", "chunks/page_v1", "chunk_map/retrieval"])
    ev = DocumentEvent
    board.add(ev("sources", "d1", "new"))
    assert board.add(ev("pages", "d1", "new", {"pages": 3}))[1] == "new"
    assert board.add(ev("chunks/pdf_v1", "d1", "failed", {"error": "boom"})) is None  # a warning, not done
    assert board.columns["Chunking"].warnings == 1
    assert board.add(ev("chunks/page_v1", "d1", "new")) is None
    assert board.add(ev("chunk_map/retrieval", "d1", "new"))[1] == "new"
    board.add(ev("sources", "d2", "unchanged"))
    assert board.add(ev("pages", "d2", "failed", {"reason": "x"}))[1] == "failed"
    rows = dict(board.rows())
    assert rows[""] == ["Reading", "Chunking"]
    assert rows["documents"] == ["2/2", "1/2"] and rows["pages"] == ["3", "3"]
    assert rows["failed"] == ["1", "0 (+1 chunker)"]
