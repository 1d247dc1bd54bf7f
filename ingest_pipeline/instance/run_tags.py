"""What a run asks Kubernetes for, by the kind of work it does (the dagster-k8s/config tag
the K8sRunLauncher reads). An ingest run reads, OCRs scanned pages (~2 CPU s a page) and
embeds (the model's session and the parse worker's 6 GiB address-space limit); a catalog
run only lists the lake and writes views; a record run (``failure_records``) reads events.

The tag is given only where the runs are Kubernetes Jobs: in a pod (Kubernetes sets
``KUBERNETES_SERVICE_HOST`` in every one), or when ``INGEST_K8S_TAGS=1`` says so. A local
``dagster dev`` shows no Kubernetes tag on its runs."""

from __future__ import annotations

import os
from typing import Any

K8S_CONFIG_TAG = "dagster-k8s/config"
RUN_RESOURCES: dict[str, dict[str, dict[str, str]]] = {
    "ingest": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}},
    "catalog": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
    "record": {"requests": {"cpu": "250m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
}


def on_kubernetes() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) or os.environ.get("INGEST_K8S_TAGS") == "1"


def k8s_run_tags(kind: str) -> dict[str, Any]:
    if not on_kubernetes():
        return {}
    return {K8S_CONFIG_TAG: {"container_config": {"resources": RUN_RESOURCES[kind]}}}


# A run that failed some documents says so in the Runs list, where a person looks first:
# Dagster gives a batch run one status for all its partitions, so the run stays a success
# while these tags count its failed documents and name the steps they failed in.
FAILED_DOCUMENTS_TAG = "ingest_pipeline/failed_documents"
FAILED_IN_TAG = "ingest_pipeline/failed_in"


def failure_tags(existing: dict[str, str], step: str, failed: int) -> dict[str, str]:
    """The run's failure tags once a step failed ``failed`` documents: the largest count any
    of its steps failed (a document failed early is skipped later, not failed again) and
    every step that failed one, in the order they did."""
    try:
        before = int(existing.get(FAILED_DOCUMENTS_TAG) or 0)
    except ValueError:
        before = 0
    steps = [s for s in (existing.get(FAILED_IN_TAG) or "").split(", ") if s]
    return {
        FAILED_DOCUMENTS_TAG: str(max(before, failed)),
        FAILED_IN_TAG: ", ".join(dict.fromkeys([*steps, step])),
    }
