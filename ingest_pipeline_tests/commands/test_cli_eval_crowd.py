"""``eval`` in both settings: a question set over its own documents, the same questions in the
crowd of every document in the root, and two sets asked as one; document-level recall beside
page-level."""

import csv
import json
import subprocess
import sys
from pathlib import Path

from ingest_pipeline_tests.pdf_writer import annual_report_pdf

CLI = str(Path(sys.executable).parent / "ingest-pipeline")


def run(data: Path, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run([CLI, "--data", str(data), *args], capture_output=True, text=True, timeout=900)
    assert "Traceback" not in out.stderr and out.returncode == 0, out.stderr[-3000:]
    return out


def question_file(folder: Path, rows: list[tuple[str, str]]) -> Path:
    (folder / "docs").mkdir(parents=True)
    path = folder / "questions.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Question", "Source Docs", "Question Type", "Source Chunk Type"])
        writer.writerows([(q, s, "Single-Doc", "Text") for q, s in rows])
    return path


def test_a_set_alone_in_the_crowd_and_joined(tmp_path):
    data = tmp_path / "data"
    (data / "sources").mkdir(parents=True)
    for year in (2019, 2020, 2021):  # the crowd: the same organisation's other years
        (data / "sources" / f"nw_{year}.pdf").write_bytes(annual_report_pdf("Northwind Traders Ltd", year))
    run(data, "ingest")
    first = question_file(
        tmp_path / "a", [("Northwind Traders capital expenditure in fiscal 2022", "*nw_2022*")]
    )
    (tmp_path / "a" / "docs" / "nw_2022.pdf").write_bytes(annual_report_pdf("Northwind Traders Ltd", 2022))
    second = question_file(tmp_path / "b", [("Fabrikam Growers harvest machines dividend", "*fab_2022*")])
    (tmp_path / "b" / "docs" / "fab_2022.pdf").write_bytes(annual_report_pdf("Fabrikam Growers Inc.", 2022))

    def evaluate(*args: str) -> dict:
        rows = json.loads(
            run(data, "eval", *args, "--profile", "retrieval", "--no-baselines", "--json").stdout
        )
        return rows[0]

    alone = evaluate("--questions", str(first))
    crowd = evaluate("--questions", str(first), "--crowd", "--skip-ingest")
    assert alone["chunks"] < crowd["chunks"]  # the crowd searches the root's other documents too
    assert crowd["questions"] == alone["questions"] == 1
    # The question names its organisation and year: its document is found first in the crowd too.
    assert crowd["document_recall@1"] == alone["document_recall@1"] == 1.0
    joined = evaluate("--questions", str(first), "--questions", str(second))
    assert joined["questions"] == 2 and joined["document_recall@5"] == 1.0
    assert joined["intervals"]["recall@5"] and joined["document_intervals"]["recall@5"]


def test_eval_over_a_root_that_holds_none_of_the_sets_documents_says_so_instead_of_scoring_zero(tmp_path):
    data = tmp_path / "data"
    (data / "sources").mkdir(parents=True)
    out = subprocess.run(
        [CLI, "--data", str(data), "eval", "--questions", "samples", "--skip-ingest"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr, (out.stdout, out.stderr[-3000:])
    assert "none of the documents of question set 'samples'" in out.stderr, out.stderr
    assert "ingest them first" in out.stderr and "0.000" not in out.stdout
