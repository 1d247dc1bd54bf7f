"""One ingest run over a range of partitions, in its own process, on the instance in
$DAGSTER_HOME: how the tests and benches start runs that really run at the same time.

    python -m ingest_pipeline_tests.run_range DATA FIRST LAST [in_process|multiprocess]

``multiprocess`` runs the job with Dagster's multiprocess executor (a process per step,
two at a time), the executor a launched run uses by default."""

import os
import sys

from dagster import DagsterInstance, execute_job, reconstructable

from ingest_pipeline.commands.ingest import QUIET
from ingest_pipeline.definitions import INGEST_JOB, build_definitions
from ingest_pipeline.resources import resources_for
from ingest_pipeline.sensors.batches import range_tags
from ingest_pipeline.settings import load_settings


def ingest_job():
    """The ingest job of $INGEST_DATA, for step processes to rebuild."""
    return build_definitions(load_settings()).resolve_job_def(INGEST_JOB)


def main(data: str, first: str, last: str, executor: str = "in_process") -> int:
    instance = DagsterInstance.get()
    if executor == "multiprocess":
        os.environ["INGEST_DATA"] = data
        os.environ["INGEST_EXECUTOR"] = "multiprocess"  # the job's executor (settings.executor)
        result = execute_job(
            reconstructable(ingest_job),
            instance=instance,
            tags=range_tags(first, last),
            run_config={**QUIET, "execution": {"config": {"max_concurrent": 2}}},
            raise_on_error=False,
        )
    else:
        settings = load_settings(data)
        result = (
            build_definitions(settings)
            .resolve_job_def(INGEST_JOB)
            .execute_in_process(
                instance=instance,
                tags=range_tags(first, last),
                resources=resources_for(settings),
                run_config=QUIET,
                raise_on_error=False,
            )
        )
    print(result.run_id)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
