"""What a run asks Kubernetes for, by the kind of work it does (the dagster-k8s/config tag
the K8sRunLauncher reads). An ingest run reads, OCRs scanned pages (~2 CPU s a page) and
embeds (the model's session and the parse worker's 6 GiB address-space limit); a catalog
run only lists the lake and writes views."""

from __future__ import annotations

from typing import Any

K8S_CONFIG_TAG = "dagster-k8s/config"
RUN_RESOURCES: dict[str, dict[str, dict[str, str]]] = {
    "ingest": {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}},
    "catalog": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
}


def k8s_run_tags(kind: str) -> dict[str, Any]:
    return {K8S_CONFIG_TAG: {"container_config": {"resources": RUN_RESOURCES[kind]}}}
