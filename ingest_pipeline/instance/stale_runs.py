"""Runs left behind by a process that died: found at the start of an in-process ingest,
marked failed and their pool slots freed, so a killed run cannot wedge the storage root.

Every in-process run carries the host, pid and process start time of the process that
executes it; a STARTED run whose process is gone (or whose pid now belongs to another
process) can never finish.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

HOST_TAG = "ingest_pipeline/host"
PID_TAG = "ingest_pipeline/pid"
STARTED_TAG = "ingest_pipeline/process_started"


def _process_started(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def process_tags() -> dict[str, str]:
    """Tags naming the process that executes a run in process."""
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), STARTED_TAG: _process_started(pid) or ""}


def process_alive(tags: dict[str, str]) -> bool:
    """Whether the process the tags name still runs (a reused pid does not count)."""
    pid = int(tags[PID_TAG])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    started = tags.get(STARTED_TAG)
    return not started or _process_started(pid) in (started, None)


@dataclass(frozen=True)
class StaleRun:
    run_id: str
    job_name: str
    pid: int


def fail_stale_runs(instance: Any) -> list[StaleRun]:
    """Mark failed every unfinished run of this host whose process is gone, and free the
    pool slots of runs that ended (or vanished) but still hold some."""
    from dagster import DagsterRunStatus, RunsFilter

    stale = []
    unfinished = [DagsterRunStatus.STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.CANCELING]
    for run in instance.get_runs(RunsFilter(statuses=unfinished, tags={HOST_TAG: socket.gethostname()})):
        if PID_TAG not in run.tags or process_alive(run.tags):
            continue
        pid = int(run.tags[PID_TAG])
        instance.report_run_failed(
            run,
            message=f"Marked failed by a later ingest: process {pid}, which ran it in process, is gone "
            "(killed?); its pool slots were freed.",
        )
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        stale.append(StaleRun(run.run_id, run.job_name, pid))
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        for run_id in storage.get_concurrency_run_ids():
            run = instance.get_run_by_id(run_id)
            if run is None or run.is_finished:
                storage.free_concurrency_slots_for_run(run_id)
    return stale
