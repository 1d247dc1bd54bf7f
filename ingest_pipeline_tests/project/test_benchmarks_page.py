"""docs/benchmarks.md is exactly what bench/benchmarks_page.py writes from bench/results/*.json,
so a result file committed without regenerating the page (make benchmarks-page) fails here,
and every result file is on it."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"


def generator():
    """bench/benchmarks_page.py as a module (bench/ is scripts, not a package)."""
    name = "bench_benchmarks_page"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / "benchmarks_page.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclass looks its module up while the class is made
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_the_committed_page_is_what_the_generator_writes():
    page = generator().render(RESULTS)
    assert PAGE.read_bytes() == page.encode("utf-8"), (
        "docs/benchmarks.md is stale or edited by hand: run make benchmarks-page and commit it"
    )
    assert "bench/benchmarks_page.py" in "\n".join(page.splitlines()[:8]), "the page must say what writes it"


def test_every_result_file_is_on_the_page():
    files = sorted(p.name for p in RESULTS.glob("*.json"))
    assert files
    page = PAGE.read_text(encoding="utf-8")
    missing = [name for name in files if f"](../bench/results/{name})" not in page]
    assert not missing, f"result files not on docs/benchmarks.md: {missing}"


def test_a_result_file_without_a_measure_or_a_command_is_refused(tmp_path: Path):
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results)
    (results / "something_new.json").write_text(json.dumps({"command": "x", "date": "2026-12-05"}))
    with pytest.raises(ValueError, match="something_new.json belongs to no measure"):
        generator().render(results)
    (results / "something_new.json").unlink()
    collector = json.loads((results / "collector.json").read_text())
    del collector["command"]
    (results / "collector.json").write_text(json.dumps(collector))
    with pytest.raises(ValueError, match="collector.json: no command"):
        generator().render(results)
