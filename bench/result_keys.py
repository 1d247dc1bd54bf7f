"""The keys every file a bench script writes under bench/results/ starts with.

``command`` is how the running script was started, with the interpreter and the script as
paths relative to the repository when they are inside it (``.venv/bin/python
bench/passages_bench.py --out bench/results/passages.json``); ``date`` is when the report
was made, in UTC. bench/benchmarks_page.py quotes both beside each figure.
"""

from __future__ import annotations

import os
import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _shown(path: str) -> str:
    absolute = Path(os.path.abspath(path))
    return str(absolute.relative_to(ROOT)) if absolute.is_relative_to(ROOT) else path


def provenance() -> dict[str, str]:
    """``{"command": ..., "date": ...}`` for the report this process is writing."""
    command = shlex.join([_shown(sys.executable), _shown(sys.argv[0]), *sys.argv[1:]])
    return {"command": command, "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
