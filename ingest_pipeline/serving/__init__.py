"""``ingest-pipeline serve``: search, document records, lineage and page pictures over HTTP,
and one web page on them, read-only, over one storage root."""
