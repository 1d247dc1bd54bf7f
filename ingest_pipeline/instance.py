"""The Dagster instance of a storage root (its ``dagster_home``)."""

from __future__ import annotations

import os

DAGSTER_YAML = """\
# The Dagster instance of this storage root: runs, partitions, sensor cursors.
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    # Look at the run queue every second (the default is 5 s): a dropped file is searchable sooner.
    dequeue_interval_seconds: 1
run_monitoring:
  enabled: true
  # A run whose process died is marked failed, and its pool slots freed, by the daemon.
  poll_interval_seconds: 30
  free_slots_after_run_end_seconds: 30
concurrency:
  runs:
    max_concurrent_runs: 2
  pools:
    # LanceDB writes conflict when concurrent: the lancedb assets share one slot.
    default_limit: 1
telemetry:
  enabled: false
"""


def ensure_dagster_home(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    config = os.path.join(path, "dagster.yaml")
    if not os.path.exists(config):
        with open(config, "w", encoding="utf-8") as handle:
            handle.write(DAGSTER_YAML)
    return os.path.abspath(path)


def instance_for(path: str):
    from dagster import DagsterInstance

    return DagsterInstance.from_config(ensure_dagster_home(path))
