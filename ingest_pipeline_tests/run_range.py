"""One ingest run over a range of partitions, in its own process, on the instance in
$DAGSTER_HOME (``python -m ingest_pipeline_tests.run_range DATA FIRST LAST``): how the
tests start runs that really run at the same time."""

import sys

from dagster import DagsterInstance

from ingest_pipeline.definitions import INGEST_JOB, build_definitions
from ingest_pipeline.resources import IngestResource
from ingest_pipeline.runner import QUIET
from ingest_pipeline.sensors import range_tags
from ingest_pipeline.settings import load_settings


def main(data: str, first: str, last: str) -> int:
    settings = load_settings(data)
    instance = DagsterInstance.get()
    result = build_definitions(settings).resolve_job_def(INGEST_JOB).execute_in_process(
        instance=instance, tags=range_tags(first, last), resources={"ingest": IngestResource(data=data)},
        run_config=QUIET, raise_on_error=False)
    print(result.run_id)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
