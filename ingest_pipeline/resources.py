"""The Dagster resource that hands assets the pipeline for a storage root."""


from dagster import ConfigurableResource

from ingest_pipeline.pipeline import Pipeline, pipeline_for


class IngestResource(ConfigurableResource):
    """The storage root (``data/`` by default); lake, LanceDB, catalog and settings live there."""

    data: str

    def pipeline(self) -> Pipeline:
        return pipeline_for(self.data)
