"""ruff's lint and format check over the whole repository, with the settings in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).with_name("ruff")


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUFF), *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_check_passes():
    result = ruff("check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_check_passes():
    result = ruff("format", "--check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_would_notice_a_long_line(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("x = '" + "a" * 120 + "'\n")
    result = ruff("check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(sample))
    assert result.returncode != 0 and "E501" in result.stdout
