"""The pipeline's stages as plain functions over the store, one document at a time, one module
per asset family (no Dagster here; the assets and the CLI are thin callers):

- ``common``: outcomes, stage errors, fingerprints and stage versions, the force switch,
  ``guarded`` and the errors rows;
- ``sources``, ``pages``, ``claims`` (the ``chunks/<id>_v<version>`` assets), ``chunk_map``,
  ``embeddings``, ``index`` (LanceDB): one stage each;
- ``reconcile``: the source folder against the partitions, for the sensor and the CLI.

Each stage reads its inputs from the store, writes its output atomically, and stores an
input fingerprint with it: when the fingerprint is unchanged the stage does nothing, so a
second run over the same bytes and configuration rewrites and re-embeds nothing. The names
below are re-exported so ``from ingest_pipeline.stages import X`` keeps working; patch a
name in the module that owns it.
"""

from ingest_pipeline.stages.chunk_map import build_chunk_map, empty_reason, withdraw_chunk_map
from ingest_pipeline.stages.claims import chunk_document, run_chunker
from ingest_pipeline.stages.common import (
    FORCE_TAG,
    IN_PROCESS_TAG,
    STAGE_VERSIONS,
    UNCHANGED,
    Finding,
    NoChunks,
    Outcome,
    StageError,
    UpstreamMissing,
    clear_error,
    error_traceback,
    guarded,
    record_error,
)
from ingest_pipeline.stages.embedding_prefetch import EmbeddingPrefetch
from ingest_pipeline.stages.embedding_text import document_title, texts_ahead
from ingest_pipeline.stages.embeddings import EmbeddingCache, embed_documents
from ingest_pipeline.stages.index import finished, index_document
from ingest_pipeline.stages.pages import load_pages, read_document
from ingest_pipeline.stages.reconcile import (
    PartitionPlan,
    plan_partitions,
    reconcile,
    remove_document,
    remove_documents,
)
from ingest_pipeline.stages.sources import load_source, observe_source, source_bytes

__all__ = [
    "FORCE_TAG",
    "IN_PROCESS_TAG",
    "STAGE_VERSIONS",
    "UNCHANGED",
    "EmbeddingCache",
    "EmbeddingPrefetch",
    "Finding",
    "NoChunks",
    "Outcome",
    "PartitionPlan",
    "StageError",
    "UpstreamMissing",
    "build_chunk_map",
    "chunk_document",
    "clear_error",
    "document_title",
    "embed_documents",
    "empty_reason",
    "error_traceback",
    "finished",
    "guarded",
    "index_document",
    "load_pages",
    "load_source",
    "observe_source",
    "plan_partitions",
    "read_document",
    "reconcile",
    "record_error",
    "remove_document",
    "remove_documents",
    "run_chunker",
    "source_bytes",
    "texts_ahead",
    "withdraw_chunk_map",
]
