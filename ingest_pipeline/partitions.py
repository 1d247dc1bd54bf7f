"""The partitions every per-document asset shares, and how keys are batched into runs."""

from collections.abc import Sequence

from dagster import DynamicPartitionsDefinition

DOCUMENTS = "documents"
documents_partitions = DynamicPartitionsDefinition(name=DOCUMENTS)


def contiguous_batches(ordered: Sequence[str], wanted: set[str], size: int) -> list[list[str]]:
    """Runs of consecutive partition keys covering exactly ``wanted``, each at most ``size``
    long: a batch is one run over a range of partitions."""
    batches: list[list[str]] = []
    run: list[str] = []
    for key in ordered:
        if key in wanted:
            run.append(key)
            if len(run) == size:
                batches.append(run)
                run = []
        elif run:
            batches.append(run)
            run = []
    if run:
        batches.append(run)
    return batches
