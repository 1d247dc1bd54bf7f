"""Every deployment file the README names exists, loads, and agrees with the others.

Debian ships no ``helm``, so ``helm template`` cannot render the values here. They are
validated instead against the Dagster chart's own values schema, stored unmodified in
deploy/helm/ (deploy/helm/README.md names its source, commit and licence), the way Helm
validates values merged over the chart's defaults: ``required`` is enforced inside list items
(Helm replaces a list whole, so nothing fills it in), every key the file sets is checked for
type, enum, closed objects and the chart's conditionals, and the Kubernetes schemas the chart
references by URL resolve offline to "any value" (nothing is downloaded). The instance config
the chart would build is validated by Dagster's own instance schema. deploy/dagster.yaml is
loaded as a real instance by test_scale_out.
"""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from ingest_pipeline.definitions import CATALOG_JOB, INGEST_JOB, WORK_TAG, build_definitions
from ingest_pipeline.instance.failure_records import RECORD_JOB
from ingest_pipeline.instance.run_tags import K8S_CONFIG_TAG, RUN_RESOURCES
from ingest_pipeline.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART_SCHEMA = DEPLOY / "helm" / "dagster-chart.values.schema.json"
K8S_SCHEMAS = (
    "https://raw.githubusercontent.com/yannh/kubernetes-json-schema/master/v1.19.0/_definitions.json"
)


class _Whole(dict):
    """A mapping inside a list: Helm replaces a list whole, so no chart default fills it in."""


def _as_helm_sees_it(value, in_list: bool = False):
    if isinstance(value, dict):
        items = {k: _as_helm_sees_it(v, in_list) for k, v in value.items()}
        return _Whole(items) if in_list else items
    if isinstance(value, list):
        return [_as_helm_sees_it(v, True) for v in value]
    return value


_REQUIRED = jsonschema.Draft202012Validator.VALIDATORS["required"]


def _required_where_no_default_fills_it(validator, required, instance, schema):
    if isinstance(instance, _Whole):
        yield from _REQUIRED(validator, required, instance, schema)


_ChartValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"required": _required_where_no_default_fills_it}
)


def _remote_refs(node) -> set[str]:
    found = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and "://" in ref:
            found.add(ref)
        for value in node.values():
            found |= _remote_refs(value)
    elif isinstance(node, list):
        for value in node:
            found |= _remote_refs(value)
    return found


def chart_validator(retrieved: list[str] | None = None):
    """A validator for the chart's schema that never goes to the network: each Kubernetes
    schema it references resolves to ``{}`` (any value)."""
    schema = json.loads(CHART_SCHEMA.read_text())
    stub: dict = {}
    for ref in _remote_refs(schema):
        base, _, pointer = ref.partition("#")
        assert base == K8S_SCHEMAS, ref  # the one document the chart points at
        node = stub
        for part in pointer.strip("/").split("/"):
            node = node.setdefault(part, {})

    def retrieve(uri: str):
        if uri != K8S_SCHEMAS:
            raise LookupError(f"not retrieving {uri}")
        if retrieved is not None:
            retrieved.append(uri)
        return Resource.from_contents(stub, default_specification=DRAFT202012)

    return _ChartValidator(schema, registry=Registry(retrieve=retrieve))


def _deepest(error):
    """Of an ``anyOf`` that failed, the branch that got furthest into the value."""
    while error.context:
        error = max(error.context, key=lambda e: len(e.absolute_path))
    return error


def chart_errors(values: dict) -> list[str]:
    """Every way ``values`` breaks the chart's schema, as 'path: message'."""
    errors = [_deepest(e) for e in chart_validator().iter_errors(_as_helm_sees_it(values))]
    return sorted(f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors)


def _values(path: Path = DEPLOY / "helm" / "values.yaml"):
    return yaml.safe_load(path.read_text())


def test_the_stored_chart_schema_is_the_dagster_charts_own():
    schema = json.loads(CHART_SCHEMA.read_text())
    assert schema["title"] == "DagsterHelmValues" and schema["description"] == "@generated"
    readme = (DEPLOY / "helm" / "README.md").read_text()
    assert "helm/dagster/values.schema.json" in readme and "Apache License 2.0" in readme
    import hashlib

    assert hashlib.sha256(CHART_SCHEMA.read_bytes()).hexdigest() in readme
    assert {r.partition("#")[0] for r in _remote_refs(schema)} == {K8S_SCHEMAS}


def test_helm_values_fit_the_chart_schema():
    retrieved: list[str] = []
    validator = chart_validator(retrieved)
    errors = sorted(e.message for e in validator.iter_errors(_as_helm_sees_it(_values())))
    assert errors == []
    assert retrieved and set(retrieved) == {K8S_SCHEMAS}  # Kubernetes references resolved, offline


def test_a_broken_values_file_fails_the_chart_schema(tmp_path):
    broken = tmp_path / "values.yaml"
    text = (DEPLOY / "helm" / "values.yaml").read_text()
    broken.write_text(
        text.replace("type: K8sRunLauncher", "type: K8sLauncher").replace(
            "maxConcurrentRuns: 8", "maxConcurrentRuns: eight"
        )
    )
    errors = chart_errors(_values(broken))
    assert any(e.startswith("runLauncher.type:") for e in errors), errors
    assert any(
        e.startswith("dagsterDaemon.runCoordinator.config.queuedRunCoordinator.maxConcurrentRuns:")
        for e in errors
    ), errors


@pytest.mark.parametrize(
    "path, value, where",
    [
        (("runLauncher", "config", "k8sRunLauncher", "resource"), {}, "runLauncher.config.k8sRunLauncher"),
        (("dagsterDaemon", "runMonitor"), {"enabled": True}, "dagsterDaemon"),  # a closed object
        (("dagsterWebserver", "replicaCount"), "two", "dagsterWebserver.replicaCount"),
        (("telemetry", "enabled"), "no", "telemetry.enabled"),
        (
            ("dagster-user-deployments", "deployments", 0, "image", "pullPolicy"),
            "Sometimes",
            "dagster-user-deployments.deployments.0.image.pullPolicy",
        ),
    ],
)
def test_each_kind_of_mistake_is_refused(path, value, where):
    values = copy.deepcopy(_values())
    node = values
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    errors = chart_errors(values)
    assert errors and all(e.startswith(where) for e in errors), errors


def test_a_code_location_must_be_complete_since_helm_replaces_lists_whole():
    values = copy.deepcopy(_values())
    del values["dagster-user-deployments"]["deployments"][0]["port"]
    assert chart_errors(values) == ["dagster-user-deployments.deployments.0: 'port' is a required property"]
    values = copy.deepcopy(_values())
    del values["runLauncher"]["config"]["k8sRunLauncher"]["envVars"]  # the chart's defaults have it
    assert chart_errors(values) == []


def test_helm_values_run_this_code_location_with_the_limits_of_dagster_yaml():
    values, instance = _values(), yaml.safe_load((DEPLOY / "dagster.yaml").read_text())
    deployment = values["dagster-user-deployments"]["deployments"][0]
    module = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dagster"]["module_name"]
    args = deployment["dagsterApiGrpcArgs"]
    assert args[args.index("--module-name") + 1] == module
    queue = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    assert queue["tagConcurrencyLimits"] == instance["concurrency"]["runs"]["tag_concurrency_limits"]
    assert queue["maxConcurrentRuns"] == instance["concurrency"]["runs"]["max_concurrent_runs"]
    assert values["additionalInstanceConfig"]["concurrency"]["pools"] == instance["concurrency"]["pools"]
    # Secrets are referenced, never written: no password or key in the values.
    text = (DEPLOY / "helm" / "values.yaml").read_text()
    assert "postgresqlPassword" not in text and "AWS_SECRET_ACCESS_KEY=" not in text
    assert deployment["envSecrets"] == values["runLauncher"]["config"]["k8sRunLauncher"]["envSecrets"]


def test_the_instance_config_the_chart_builds_is_valid_for_dagster():
    from dagster._config import process_config
    from dagster._core.instance.config import dagster_instance_config_schema

    queue = _values()["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    config = {
        "run_coordinator": {
            "module": "dagster.core.run_coordinator",
            "class": "QueuedRunCoordinator",
            "config": {
                "max_concurrent_runs": queue["maxConcurrentRuns"],
                "tag_concurrency_limits": queue["tagConcurrencyLimits"],
            },
        },
        "run_monitoring": {
            "enabled": True,
            "start_timeout_seconds": 300,
            "poll_interval_seconds": 30,
            "free_slots_after_run_end_seconds": 60,
        },
        **_values()["additionalInstanceConfig"],
    }
    assert process_config(dagster_instance_config_schema(), config).success
    bad = {**config, "concurrency": {"pools": {"default_limit": "one"}}}
    assert not process_config(dagster_instance_config_schema(), bad).success


def test_runs_ask_kubernetes_for_resources_by_kind_of_work_only_on_kubernetes(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("INGEST_K8S_TAGS", raising=False)
    local = build_definitions(load_settings(str(tmp_path))).resolve_job_def(INGEST_JOB)
    assert K8S_CONFIG_TAG not in local.tags and local.tags[WORK_TAG] == "ingest"  # dagster dev: no pod
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")  # what Kubernetes sets in every pod
    defs = build_definitions(load_settings(str(tmp_path)))
    ingest, catalog = defs.resolve_job_def(INGEST_JOB), defs.resolve_job_def(CATALOG_JOB)
    assert ingest.tags[WORK_TAG] == "ingest" and catalog.tags[WORK_TAG] == "catalog"
    import json

    def memory_gib(tags):
        value = json.loads(tags[K8S_CONFIG_TAG])["container_config"]["resources"]["requests"]["memory"]
        return float(value[:-2]) / (1024 if value.endswith("Mi") else 1)

    default_pod = _values()["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]["containerConfig"]
    assert memory_gib(ingest.tags) > memory_gib(
        {K8S_CONFIG_TAG: json.dumps({"container_config": default_pod})}
    )
    assert memory_gib(ingest.tags) > memory_gib(catalog.tags)
    record = defs.resolve_job_def(RECORD_JOB)  # it reads events, as a catalog run reads the lake
    assert record.tags[WORK_TAG] == "record" and memory_gib(ingest.tags) > memory_gib(record.tags)
    assert set(RUN_RESOURCES) == {"ingest", "catalog", "record"}


def test_the_image_installs_the_deploy_extra_and_checks_the_model_is_inside():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "'.[deploy]'" in dockerfile and any(d.startswith("dagster-k8s") for d in extras["deploy"])
    assert "default_embedder()" in dockerfile  # the build fails if the model is not in the image
    # the default embedder's int8 graph is built into the image, where runs look for it
    assert "quantized_model('/opt/ingest_pipeline/models')" in dockerfile
    assert "ENV INGEST_MODELS=/opt/ingest_pipeline/models" in dockerfile


def test_the_committed_local_instance_config_is_the_one_new_roots_get_and_dagster_accepts_it():
    from dagster._config import process_config
    from dagster._core.instance.config import dagster_instance_config_schema

    from ingest_pipeline.instance.home import DAGSTER_YAML

    committed = (ROOT / "data" / "dagster_home" / "dagster.yaml").read_text()
    assert committed == DAGSTER_YAML
    assert process_config(dagster_instance_config_schema(), yaml.safe_load(committed)).success


def test_a_runs_failure_tags_keep_the_largest_count_and_every_step_once():
    from ingest_pipeline.instance.run_tags import FAILED_DOCUMENTS_TAG, FAILED_IN_TAG, failure_tags

    tags = failure_tags({"other": "x"}, "pages", 2)
    assert tags == {FAILED_DOCUMENTS_TAG: "2", FAILED_IN_TAG: "pages"}
    tags = failure_tags(tags, "chunk_map_retrieval", 1)
    tags = failure_tags(tags, "pages", 3)
    assert tags == {FAILED_DOCUMENTS_TAG: "3", FAILED_IN_TAG: "pages, chunk_map_retrieval"}
