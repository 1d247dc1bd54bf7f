"""The LanceDB writers' pool on a shared PostgreSQL instance, made by runs that start together."""

import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ingest_pipeline.instance.pools import ensure_pool
from ingest_pipeline_tests.servers import start_postgres

ROOT = Path(__file__).resolve().parents[2]
RUNS = 6


def _limits(instance) -> dict:
    return {p.name: (p.limit, p.from_default) for p in instance.event_log_storage.get_pool_limits()}


def test_runs_starting_together_on_postgres_all_find_the_pool_and_a_limit_set_by_hand_stays(
    tmp_path, monkeypatch
):
    from dagster import DagsterInstance

    pg = start_postgres("Pools-pg-password-7c1e")
    try:
        for key, value in pg.env().items():
            monkeypatch.setenv(key, value)
        home = tmp_path / "home"
        home.mkdir()
        shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
        instances = [DagsterInstance.from_config(str(home)) for _ in range(RUNS)]
        assert type(instances[0].event_log_storage).__name__ == "PostgresEventLogStorage"
        assert "lancedb" not in _limits(instances[0])  # a fresh instance: no run made it yet

        together = threading.Barrier(RUNS)

        def run_starts(instance) -> bool:
            together.wait()
            return ensure_pool(instance)

        with ThreadPoolExecutor(RUNS) as starts:
            assert list(starts.map(run_starts, instances)) == [True] * RUNS
        assert _limits(instances[0])["lancedb"] == (1, True)  # deploy/dagster.yaml's default_limit

        instances[0].event_log_storage.set_concurrency_slots("lancedb", 3)  # set in the UI
        assert ensure_pool(instances[1]) and _limits(instances[1])["lancedb"] == (3, False)
        for instance in instances:
            instance.dispose()
    finally:
        pg.stop()


def test_a_run_s_resources_make_the_pool_as_they_start(tmp_path):
    from dagster import build_init_resource_context, instance_for_test

    from ingest_pipeline.resources import IngestResource

    with instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 1}}}) as instance:
        assert "lancedb" not in _limits(instance)
        IngestResource(data=str(tmp_path)).setup_for_execution(build_init_resource_context(instance=instance))
        assert _limits(instance)["lancedb"] == (1, True)
    with instance_for_test() as instance:  # no default limit: no pool is made
        assert not ensure_pool(instance) and "lancedb" not in _limits(instance)
