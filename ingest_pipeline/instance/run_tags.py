"""What a run asks Kubernetes for, by the kind of work it does (the dagster-k8s/config tag
the K8sRunLauncher reads). An ingest run reads, OCRs scanned pages (~2 CPU s a page) and
embeds (the model's session and the parse worker's 6 GiB address-space limit); a catalog
run only lists the lake and writes views.

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
}


def on_kubernetes() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) or os.environ.get("INGEST_K8S_TAGS") == "1"


def k8s_run_tags(kind: str) -> dict[str, Any]:
    if not on_kubernetes():
        return {}
    return {K8S_CONFIG_TAG: {"container_config": {"resources": RUN_RESOURCES[kind]}}}
