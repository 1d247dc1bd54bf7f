"""A run's asset check evaluations, written together instead of one event at a time.

A step judges its checks per document: one evaluation event per document and check, which
Dagster's SQLite storage writes in three statements and three commits each (the run's
database, the index, the execution row). Here a run's evaluations wait in memory until its
next other event (the step's success, say) or ``CHECKS_KEPT`` of them, then go in one
multi-row insert per database, with every planned execution row updated by one statement
in the same transaction, reusing each event's serialized form. Reads of the event log
write them first. A process that dies in between loses the evaluations its unfinished
step made, never a committed one.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from dagster._core.events import DagsterEventType
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus
from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable, SqlEventLogStorageTable


def _utc_naive(timestamp: float) -> Any:
    """A timestamp as the executions table keeps it: UTC, without a zone."""
    return datetime.fromtimestamp(timestamp, timezone.utc).replace(tzinfo=None)


def _run_check_evaluation(event: Any) -> bool:
    """A check evaluation a run made (a runless one is written at once, as Dagster does)."""
    return bool(
        event.is_dagster_event
        and event.dagster_event_type == DagsterEventType.ASSET_CHECK_EVALUATION
        and event.run_id
    )


class KeptCheckEvaluations:
    """Mixed into an SQL event log storage before it (its ``store_event`` comes first)."""

    CHECKS_KEPT = 2000

    def _keep_checks(self) -> None:
        self._checks: list[Any] = []  # check evaluations not yet written
        self._checks_lock = threading.Lock()

    def store_event(self, event: Any) -> None:
        if _run_check_evaluation(event):
            with self._checks_lock:
                self._checks.append(event)
                full = len(self._checks) >= self.CHECKS_KEPT
            if full:
                self._write_checks()
            return
        self._write_checks()
        super().store_event(event)

    def _write_checks(self) -> None:
        """The kept check evaluations: their rows in each run's database and in the index,
        and their execution rows, in one transaction per database."""
        with self._checks_lock:
            events, self._checks = self._checks, []
        if not events:
            return
        rows = [self._event_to_row(event) for event in events]
        by_run: dict[str, list[dict]] = {}
        for event, row in zip(events, rows):
            by_run.setdefault(event.run_id, []).append(row)
        for run_id, run_rows in by_run.items():
            with self.run_connection(run_id) as conn:
                conn.execute(SqlEventLogStorageTable.insert(), run_rows)
        with self.index_connection() as conn:
            inserted = conn.execute(
                SqlEventLogStorageTable.insert().returning(
                    SqlEventLogStorageTable.c.id, sort_by_parameter_order=True
                ),
                rows,
            )
            ids = [row[0] for row in inserted]
            updated = self._update_executions(conn, events, rows, ids)
        if updated != len(events):  # a row not planned, or a check without partitions: Dagster's own
            for event, event_id in zip(events, ids):  # path, which updates or inserts each row
                self.store_asset_check_event(event, event_id)

    @staticmethod
    def _update_executions(conn: Any, events: list, rows: list[dict], ids: list[int]) -> int:
        """Each evaluation's planned execution row (one per run, check and partition; the
        unique index finds it) set to its result, as Dagster sets it, in one statement run
        for all of them with the events already serialized for their rows. How many rows
        it updated (-1, nothing done, when one has no partition)."""
        T = AssetCheckExecutionsTable
        values = []
        for event, row, event_id in zip(events, rows, ids):
            evaluation = event.dagster_event.event_specific_data
            target = evaluation.target_materialization_data
            values.append(
                {
                    "k_asset": evaluation.asset_key.to_string(),
                    "k_check": evaluation.check_name,
                    "k_run": event.run_id,
                    "k_partition": evaluation.partition,
                    "execution_status": (
                        AssetCheckExecutionRecordStatus.SUCCEEDED.value
                        if evaluation.passed
                        else AssetCheckExecutionRecordStatus.FAILED.value
                    ),
                    "evaluation_event": row["event"],
                    "evaluation_event_timestamp": _utc_naive(event.timestamp),
                    "evaluation_event_storage_id": event_id,
                    "materialization_event_storage_id": target.storage_id if target else None,
                }
            )
        if any(v["k_partition"] is None for v in values):
            return -1
        statement = (
            T.update()
            .where(
                T.c.asset_key == sa.bindparam("k_asset"),
                T.c.check_name == sa.bindparam("k_check"),
                T.c.run_id == sa.bindparam("k_run"),
                T.c.partition == sa.bindparam("k_partition"),
            )
            .values(
                execution_status=sa.bindparam("execution_status"),
                evaluation_event=sa.bindparam("evaluation_event"),
                evaluation_event_timestamp=sa.bindparam("evaluation_event_timestamp"),
                evaluation_event_storage_id=sa.bindparam("evaluation_event_storage_id"),
                materialization_event_storage_id=sa.bindparam("materialization_event_storage_id"),
            )
        )
        return conn.execute(statement, values).rowcount


def kept_reads_write_first(cls: type) -> None:
    """Make each event-log read of ``cls`` write the kept evaluations first."""
    for name in KEPT_READS:
        if hasattr(cls, name):
            setattr(cls, name, _written_first(cls, name))


def _written_first(cls: type, name: str):
    """A read of the event log that first writes the check evaluations this process keeps,
    so it never misses what this process itself recorded."""

    def read(self, *args: Any, **kwargs: Any) -> Any:
        self._write_checks()
        return getattr(super(cls, self), name)(*args, **kwargs)

    read.__name__ = name
    return read


KEPT_READS = (
    "get_asset_check_execution_history",
    "get_latest_asset_check_execution_by_key",
    "get_asset_check_partition_info",
    "get_asset_check_summary_records",
    "get_asset_check_state",
    "get_records_for_run",
    "get_logs_for_run",
    "get_event_records",
    "fetch_materializations",
)
