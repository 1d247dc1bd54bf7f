"""The DuckDB catalog: views over the lake (never the write target of a run)."""

from dagster import AssetExecutionContext, MaterializeResult, MetadataValue, asset

from ingest_pipeline.resources import IngestResource, StoreResource
from ingest_pipeline.storage.catalog import build_catalog


@asset(group_name="catalog", kinds={"duckdb"})
def catalog(
    context: AssetExecutionContext, ingest: IngestResource, store: StoreResource
) -> MaterializeResult:
    """DuckDB views (sources, pages, page_lines, claims, chunks, embeddings, errors) in catalog.duckdb."""
    catalog_path = ingest.settings().catalog_path
    counts = build_catalog(store.store(), catalog_path)
    return MaterializeResult(
        metadata={
            "path": MetadataValue.path(catalog_path),
            **{f"rows_{view}": MetadataValue.int(n) for view, n in counts.items()},
        }
    )
