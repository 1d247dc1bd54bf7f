"""Start the real ``dagster dev`` (webserver and daemon) on a temporary DAGSTER_HOME, the way a
person runs the UI, and stop it and every process it started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks (with the pid, it names one process), or None
    once it has ended."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[19])


def alive(pid: int, started: int | None = None) -> bool:
    now = start_time(pid)
    return now is not None and (started is None or now == started)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@dataclass
class DagsterDev:
    process: subprocess.Popen
    url: str
    home: Path
    data: Path
    log: Path
    seen: dict[int, int]

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        if answer.get("errors"):
            raise RuntimeError(answer["errors"])
        return answer["data"]

    def processes(self) -> set[int]:
        """Live processes below dagster dev now; remembered so the stop can check them all."""
        now = descendants(self.process.pid)
        for pid in now:
            started = start_time(pid)
            if started is not None:
                self.seen.setdefault(pid, started)
        return now

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


@contextmanager
def dagster_dev(data: Path, env: dict[str, str] | None = None, timeout: float = 180) -> Iterator[DagsterDev]:
    """``dagster dev`` on ``data`` (its own DAGSTER_HOME with the project's dagster.yaml); on exit
    everything it started is stopped, and a process left alive fails the caller."""
    home = data / "dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "data" / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    port = free_port()
    log = data / "dagster_dev.log"
    dagster = Path(sys.executable).parent / "dagster"
    full_env = {**os.environ, "DAGSTER_HOME": str(home), "INGEST_DATA": str(data), **(env or {})}
    command = [
        "env",
        "--default-signal=INT,TERM",
        str(dagster),
        "dev",
        "-w",
        str(ROOT / "workspace.yaml"),
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
    ]
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            command, cwd=ROOT, env=full_env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    dev = DagsterDev(process, f"http://127.0.0.1:{port}", home, data, log, {})
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"dagster dev exited {process.returncode}:\n{dev.log_tail()}")
            try:
                dev.graphql("{ version }")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"dagster dev did not answer in {timeout:.0f} s:\n{dev.log_tail()}"
                    ) from None
                time.sleep(1)
        yield dev
    finally:
        stop(dev)


def stop(dev: DagsterDev, grace: float = 30) -> None:
    """Stop dagster dev by process id (INT, as Ctrl-C would), then every process it started
    that is still alive (TERM, then KILL), so nothing outlives the test."""
    dev.processes()
    if dev.process.poll() is None:
        dev.process.send_signal(signal.SIGINT)
        try:
            dev.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        left = [pid for pid, started in dev.seen.items() if alive(pid, started)]
        if dev.process.poll() is None:
            left.append(dev.process.pid)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(alive(pid, dev.seen.get(pid)) for pid in left):
            time.sleep(0.2)
    if dev.process.poll() is None:
        dev.process.wait(timeout=10)
    survivors = [pid for pid, started in dev.seen.items() if alive(pid, started)]
    if survivors:
        raise AssertionError("processes survived SIGKILL: " + "; ".join(cmdline(p)[:120] for p in survivors))


def wait_for(
    predicate,
    timeout: float,
    interval: float = 1.0,
    what: str = "condition",
    dev: DagsterDev | None = None,
    detail=None,
):
    deadline = time.monotonic() + timeout
    while True:
        if dev is not None:
            dev.processes()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what}"
                + (f": {detail()}" if detail else "")
                + (f"\n{dev.log_tail()}" if dev else "")
            )
        time.sleep(interval)
