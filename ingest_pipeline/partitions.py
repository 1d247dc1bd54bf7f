"""The partitions every per-document asset shares."""

from dagster import DynamicPartitionsDefinition

DOCUMENTS = "documents"
documents_partitions = DynamicPartitionsDefinition(name=DOCUMENTS)
