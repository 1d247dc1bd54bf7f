"""Bounded memory: a file over its format's size limit is one clear error found before its
bytes are loaded, and the rest of the batch completes."""

import json
import subprocess
import sys

from ingest_pipeline.commands.ingest import ingest
from ingest_pipeline.resources import parts_for
from ingest_pipeline.settings import load_settings
from ingest_pipeline_tests.conftest import write

MiB = 1024 * 1024


def _big_text(path, size: int) -> None:
    line = b"The greenhouse log records temperature, humidity and the vents' position every hour.\n"
    block = line * (MiB // len(line) + 1)
    with open(path, "wb") as handle:
        written = 0
        while written < size:
            handle.write(block[: size - written])
            written += min(len(block), size - written)


def _nested_quotes(path, levels: int) -> None:
    with open(path, "wb") as handle:
        for depth in range(1, levels + 1):
            handle.write(b">" * depth + b"\n")


def test_files_over_their_format_limit_fail_alone_before_loading(data_dir):
    root = data_dir / "sources"
    _big_text(root / "huge.txt", 200 * MiB)
    _nested_quotes(root / "deep.md", 10_000)  # 50 MB: 10,000 nested quote levels, one per line
    _big_text(root / "medium.txt", 2 * MiB)  # under the default, over this root's 1 MiB text limit
    write(root / "small.txt", "Shade screens close above 800 W per square metre.\n")
    write(root / "guide.md", "# Pests\n\nWhitefly traps are checked every Monday.\n")
    (data_dir / "ingest_pipeline.toml").write_text("[limits.max_mib]\ntext = 1\n")
    assert (root / "deep.md").stat().st_size > 50_000_000
    p = parts_for(str(data_dir))
    assert p.settings.max_bytes["text"] == MiB and p.settings.max_bytes["markdown"] == 16 * MiB
    report = ingest(p)
    failed = {report.paths[d]: errs for d, errs in report.failed.items()}
    assert sorted(report.paths[d] for d in report.new) == ["guide.md", "small.txt"]
    assert set(failed) == {"huge.txt", "deep.md", "medium.txt"}
    assert all(len(errs) == 1 and errs[0]["stage"] == "sources" for errs in failed.values())
    assert failed["huge.txt"][0]["reason"].startswith(
        "text/plain file of 200.0 MiB is over the text limit of 1 MiB"
    )
    assert "over the markdown limit of 16 MiB" in failed["deep.md"][0]["reason"]
    assert "over the text limit of 1 MiB" in failed["medium.txt"][0]["reason"]
    assert report.chunks >= 2


def test_refusing_a_huge_file_does_not_load_it(data_dir):
    _big_text(data_dir / "sources" / "huge.txt", 200 * MiB)
    (data_dir / "sources" / "tiny.txt").write_text("A small file, observed first.\n")
    script = f"""
import json, sys
from ingest_pipeline.documents import collect
from ingest_pipeline.settings import load_settings
from ingest_pipeline.stages import observe_source, guarded
from ingest_pipeline.storage.store import Store

def hwm():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) * 1024

settings = load_settings({str(data_dir)!r})
store = Store.at(settings.lake_root)
entries = collect(settings, [settings.source_root])
store.save_inventory(entries)
by_name = {{e.path: e.document_id for e in entries}}
# A small file first, so what observing imports or compiles on first use is not counted.
guarded(store, "sources", by_name["tiny.txt"], "r", observe_source, settings, store, by_name["tiny.txt"], "r")
before = hwm()
outcome = guarded(store, "sources", by_name["huge.txt"], "r", observe_source, settings, store,
                  by_name["huge.txt"], "r")
grew = hwm() - before
print(json.dumps({{"status": outcome.status, "reason": outcome.detail.get("reason"), "grew": grew}}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] == "failed" and "over the text limit of 16 MiB" in result["reason"]
    assert result["grew"] < 16 * MiB  # the 200 MiB of bytes were never read
    assert load_settings(data_dir).max_bytes["text"] == 16 * MiB
