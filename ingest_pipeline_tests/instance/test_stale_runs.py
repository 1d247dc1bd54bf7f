"""Runs whose process died are found, marked failed and their pool slots freed."""

import os
import subprocess
import sys

from dagster import DagsterRun, DagsterRunStatus

from ingest_pipeline.instance.stale_runs import (
    HOST_TAG,
    PID_TAG,
    fail_stale_runs,
    process_alive,
    process_tags,
)
from ingest_pipeline_tests.dagster_helpers import temporary_instance


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _started_run(instance, run_id: str, tags: dict) -> DagsterRun:
    run = DagsterRun(job_name="ingest_documents", run_id=run_id, status=DagsterRunStatus.STARTED, tags=tags)
    instance.add_run(run)
    return run


def test_a_started_run_of_a_dead_process_is_failed_and_frees_its_lancedb_slot(data_dir):
    instance = temporary_instance(data_dir)
    storage = instance.event_log_storage
    storage.set_concurrency_slots("lancedb", 1)
    dead = {**process_tags(), PID_TAG: str(_dead_pid())}
    _started_run(instance, "deadrun", dead)
    _started_run(instance, "liverun", process_tags())
    storage.claim_concurrency_slot("lancedb", "deadrun", "lancedb_retrieval")
    assert storage.get_concurrency_info("lancedb").active_slot_count == 1

    stale = fail_stale_runs(instance)

    assert [s.run_id for s in stale] == ["deadrun"]
    assert instance.get_run_by_id("deadrun").status == DagsterRunStatus.FAILURE
    assert instance.get_run_by_id("liverun").status == DagsterRunStatus.STARTED  # its process is this one
    assert storage.get_concurrency_info("lancedb").active_slot_count == 0
    logs = [e.message for e in instance.all_logs("deadrun") if e.dagster_event]
    assert any("is gone" in (m or "") for m in logs)
    assert fail_stale_runs(instance) == []


def test_a_reused_pid_is_not_taken_for_the_run_process():
    tags = {**process_tags(), HOST_TAG: "here"}
    assert process_alive(tags)
    assert not process_alive({**tags, "ingest_pipeline/process_started": "1"})  # same pid, another start
    assert not process_alive({**tags, PID_TAG: str(_dead_pid())})
    assert os.getpid() == int(tags[PID_TAG])


def test_slots_held_by_runs_that_ended_are_freed(data_dir):
    instance = temporary_instance(data_dir)
    storage = instance.event_log_storage
    storage.set_concurrency_slots("lancedb", 1)
    run = DagsterRun(job_name="ingest_documents", run_id="endedrun", status=DagsterRunStatus.FAILURE, tags={})
    instance.add_run(run)
    storage.claim_concurrency_slot("lancedb", "endedrun", "lancedb_default")
    fail_stale_runs(instance)
    assert storage.get_concurrency_info("lancedb").active_slot_count == 0
