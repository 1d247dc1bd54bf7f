"""The Dagster resources the assets use: the storage root's pipeline, and the parse worker."""

from __future__ import annotations

from dagster import ConfigurableResource, InitResourceContext
from pydantic import PrivateAttr

from ingest_pipeline.isolation import ParseWorker
from ingest_pipeline.pipeline import Pipeline, pipeline_for


class IngestResource(ConfigurableResource):
    """The storage root (``data/`` by default); lake, LanceDB, catalog and settings live there.

    ``force`` (in the launchpad, run config ``resources: {ingest: {config: {data: <root>,
    force: true}}}``; run config for a resource replaces all its fields, so ``data`` is given
    too) makes every stage of the run recompute whatever its fingerprint says, like the run
    tag ``ingest/force=true``."""

    data: str
    force: bool = False

    def pipeline(self) -> Pipeline:
        return pipeline_for(self.data)


class ParseWorkerResource(ConfigurableResource):
    """Readers and chunkers run in a spawned worker with a time and memory limit. The worker
    starts on the first document a step parses and is stopped when the step ends, so a step
    process exits as soon as its work is done (``timeout`` 0 parses in the step's process)."""

    timeout: float = 300.0
    memory_mib: int = 6144

    _worker: ParseWorker | None = PrivateAttr(default=None)

    def worker(self) -> ParseWorker:
        if self._worker is None:
            self._worker = ParseWorker(self.timeout, self.memory_mib * 2**20 if self.memory_mib else None)
        return self._worker

    def teardown_after_execution(self, context: InitResourceContext) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None


def parse_worker_for(settings) -> ParseWorkerResource:
    """The parse worker resource configured from a storage root's settings."""
    memory = settings.parse_memory_bytes or 0
    return ParseWorkerResource(timeout=settings.parse_timeout, memory_mib=memory // 2**20)


def resources_for(settings) -> dict:
    """The resources every job of a storage root binds (the CLI and the tests use the same)."""
    return {"ingest": IngestResource(data=settings.data), "parse": parse_worker_for(settings)}
