"""Every stage bounded: a legal 16 MB nested Markdown (quote markers that are one token each,
under the 16 MiB Markdown limit) goes through the chunk map's token work — the chunker, then
the embedding texts cut to the model's limit with their line offsets — in a stated time,
tokenizing each character a bounded number of times."""

import json
import subprocess
import sys
import time

from ingest_pipeline.settings import load_settings

MiB = 1024 * 1024
SECONDS = 420  # the bound this test states for the whole document's chunk-map token work
PASSES = 6.0  # characters given to the tokenizer, per character of the document


def nested_markdown(path, size: int) -> int:
    """Quotes nested one level deeper a line (one block quote, every marker one token)."""
    written, depth = 0, 0
    with open(path, "w") as handle:
        while True:
            depth += 1
            line = ">" * depth + "\n"
            if written + len(line) > size:
                return written
            handle.write(line)
            written += len(line)


CHILD = """
import json, sys, time
from ingest_pipeline.chunkers.markdown import MarkdownChunker
from ingest_pipeline.contract import PageOutput
from ingest_pipeline.embedding.minilm import default_embedder
from ingest_pipeline.settings import load_settings
from ingest_pipeline.stages.embedding_text import Expander

path, data = sys.argv[1], sys.argv[2]
text = open(path, encoding="utf-8").read()
embedder = default_embedder()
embedder.token_offsets("warm up")
tokenized = [0]
offsets = embedder.token_offsets

def counted(part):
    tokenized[0] += len(part)
    return offsets(part)

embedder.token_offsets = counted
started = time.monotonic()
page = (PageOutput(page=1, status="read", reader="text@1", text=text),)
pieces = list(MarkdownChunker({}).chunk(text.encode(), "text/markdown", page)[0].pieces)
expand = Expander(load_settings(data).profiles[0], embedder, "deep.md")
parts = [p for fitted in expand(pieces) for p in fitted]
lines = [p.meta.get("end_line") for p in parts if p.meta.get("end_line") is not None]
print(json.dumps({"seconds": time.monotonic() - started, "parts": len(parts), "tokenized": tokenized[0],
                  "last_line": max(lines, default=None), "chars": len(text)}))
"""


def test_a_16_mb_nested_markdown_finishes_its_chunk_map_token_work_in_bounded_time(data_dir):
    path = data_dir / "sources" / "deep.md"
    size = nested_markdown(path, 16_000_000)
    assert 15 * MiB < size <= load_settings(data_dir).max_bytes["markdown"]
    started = time.monotonic()
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), str(data_dir)],
            capture_output=True,
            text=True,
            timeout=SECONDS + 60,
        )
    except subprocess.TimeoutExpired:
        raise AssertionError(f"not done after {time.monotonic() - started:.0f} s") from None
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["seconds"] < SECONDS, result
    assert result["tokenized"] < PASSES * result["chars"], result
    assert result["parts"] > 50_000  # every token of the document is in a part that fits
    assert result["last_line"] >= path.read_text().count("\n") - 2  # offsets reach the end


def test_a_workbook_over_the_spreadsheet_limit_fails_alone_before_loading(data_dir):
    """XLSX has its own size limit, the one the memory bench/large_inputs_bench.py measured
    supports (the Office limit of Word and PowerPoint files is far larger)."""
    import os
    import zipfile

    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline_tests.conftest import write

    settings = load_settings(data_dir)
    assert settings.max_bytes["spreadsheet"] < settings.max_bytes["office"]
    with zipfile.ZipFile(data_dir / "sources" / "ledger.xlsx", "w", zipfile.ZIP_STORED) as book:
        book.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types/>')
        book.writestr("xl/workbook.xml", '<?xml version="1.0"?><workbook/>')
        book.writestr("xl/media/scan.bin", os.urandom(settings.max_bytes["spreadsheet"] + MiB))
    write(data_dir / "sources" / "notes.txt", "The ledger is closed every quarter.\n")
    report = ingest(parts_for(str(data_dir)))
    failed = {report.paths[d]: errs for d, errs in report.failed.items()}
    assert [report.paths[d] for d in report.new] == ["notes.txt"]
    assert list(failed) == ["ledger.xlsx"] and failed["ledger.xlsx"][0]["stage"] == "sources"
    assert "over the spreadsheet limit of 15 MiB" in failed["ledger.xlsx"][0]["reason"]


def test_a_document_over_the_chunk_map_time_budget_fails_alone_with_stage_and_budget(data_dir):
    """The budget the run process gives one document's chunk map (``[limits] stage_timeout``):
    a document over it is one errors row naming the stage and the budget; the batch goes on."""
    from ingest_pipeline.commands.ingest import ingest
    from ingest_pipeline.resources import parts_for
    from ingest_pipeline_tests.conftest import write

    nested_markdown(data_dir / "sources" / "deep.md", 3_000_000)
    write(data_dir / "sources" / "guide.md", "# Pests\n\nWhitefly traps are checked every Monday.\n")
    (data_dir / "ingest_pipeline.toml").write_text("[limits]\nstage_timeout = 1\n")
    p = parts_for(str(data_dir))
    assert p.settings.stage_timeout == 1
    report = ingest(p)
    failed = {report.paths[d]: errs for d, errs in report.failed.items()}
    assert [report.paths[d] for d in report.new] == ["guide.md"]
    assert list(failed) == ["deep.md"], failed
    # one errors row per profile's chunk map, each naming its stage and the budget
    stages = sorted(e["stage"] for e in failed["deep.md"])
    assert stages == sorted(f"chunk_map/{profile.name}" for profile in p.settings.profiles), failed
    for error in failed["deep.md"]:
        assert error["reason"].startswith(f"{error['stage']}: over the time budget of 1 s per document")


def test_a_document_over_the_memory_budget_fails_alone_with_stage_and_budget(data_dir):
    """``[limits] stage_memory_mib``: a table of 40,000 rows grows the run process by hundreds
    of MiB while its chunk map is built; over a budget of 48 MiB it is one errors row naming
    the stage and the budget, and the Markdown beside it is ingested (the command line, in
    its own process, so the growth is this ingest's alone)."""
    from ingest_pipeline_tests.conftest import write

    rows = "".join(
        f"2024-01-{1 + i % 28:02d},ACC-{i % 997:04d},payment {i} for supplies,{i}\n" for i in range(40_000)
    )
    write(data_dir / "sources" / "ledger.csv", "date,account,description,amount\n" + rows)
    write(data_dir / "sources" / "guide.md", "# Pests\n\nWhitefly traps are checked every Monday.\n")
    (data_dir / "ingest_pipeline.toml").write_text("[limits]\nstage_memory_mib = 48\n")
    assert load_settings(data_dir).stage_memory_bytes == 48 * MiB
    cli = [sys.executable, "-m", "ingest_pipeline.commands.cli", "--data", str(data_dir)]
    out = subprocess.run([*cli, "ingest", "--json"], capture_output=True, text=True, timeout=900)
    report = json.loads(out.stdout)
    failed = report["failures"]
    assert report["documents_by_status"]["new"] == ["guide.md"], out.stdout[-3000:]
    assert list(failed) == ["ledger.csv"], failed
    over = [e for e in failed["ledger.csv"] if "over the memory budget of 48 MiB per document" in e["reason"]]
    assert over and all(e["stage"].startswith("chunk_map/") for e in over), failed
    assert all(e["reason"].startswith(f"{e['stage']}: ") for e in over), failed
