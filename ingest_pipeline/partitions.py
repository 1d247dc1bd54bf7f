"""The partitions every per-document asset shares (how keys are batched into runs is
``stages.reconcile.contiguous_batches``)."""

from dagster import DynamicPartitionsDefinition

from ingest_pipeline.stages.reconcile import contiguous_batches  # noqa: F401  (re-exported for callers)

DOCUMENTS = "documents"
documents_partitions = DynamicPartitionsDefinition(name=DOCUMENTS)
