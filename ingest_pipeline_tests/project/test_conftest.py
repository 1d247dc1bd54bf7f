"""The corpus guard: without ../shared/corpus the corpus tests skip on a workstation and
fail loudly in CI."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_corpus_test(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["INGEST_TEST_CORPUS"] = str(tmp_path / "no-corpus-here")
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "ingest_pipeline_tests/chunkers/pdf/test_pdf_lines.py::test_encrypted_pdf_is_read_with_the_password_its_content_carries",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_missing_corpus_fails_in_ci_and_skips_elsewhere(tmp_path):
    ci = run_corpus_test(tmp_path, "true")
    assert ci.returncode == 1, ci.stdout[-2000:]
    assert "1 error" in ci.stdout and "shared/corpus is not present" in ci.stdout
    local = run_corpus_test(tmp_path, None)
    assert local.returncode == 0, local.stdout[-2000:]
    assert "1 skipped" in local.stdout
