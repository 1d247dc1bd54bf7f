"""Every deployment file the README names exists, loads, and agrees with the others.

Debian ships no ``helm``, so ``helm template`` cannot render the values here. They are
validated instead against the parts of the Dagster chart's values schema that they set
(keys, types, enums and closed objects as the chart's values.schema.json declares them,
transcribed below), and the instance config the chart would build is validated by
Dagster's own instance schema. deploy/dagster.yaml is loaded as a real instance by
test_scale_out.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import jsonschema
import pytest
import yaml

from ingest_pipeline.definitions import CATALOG_JOB, INGEST_JOB, WORK_TAG, build_definitions
from ingest_pipeline.deployment import K8S_CONFIG_TAG, RUN_RESOURCES
from ingest_pipeline.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"

_STR, _INT, _BOOL = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
_NAMED = {"type": "array", "items": {"type": "object", "required": ["name"]}}
_RESOURCES = {"type": "object", "additionalProperties": False,
              "properties": {"requests": {"type": "object"}, "limits": {"type": "object"}}}
_IMAGE = {"type": "object", "required": ["repository", "pullPolicy"],
          "properties": {"repository": _STR, "tag": {"type": ["string", "integer", "null"]},
                         "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]}}}
_TAG_LIMIT = {"type": "object", "required": ["key", "limit"], "additionalProperties": False,
              "properties": {"key": _STR, "value": {"type": ["string", "object", "null"]}, "limit": _INT}}
CHART_SCHEMA = {
    "type": "object",
    "properties": {
        "global": {"type": "object", "properties": {"postgresqlSecretName": _STR, "dagsterHome": _STR}},
        "dagster-user-deployments": {
            "type": "object", "required": ["enabled", "deployments"],
            "properties": {"enabled": _BOOL, "deployments": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["name", "image", "port"],
                "anyOf": [{"required": ["dagsterApiGrpcArgs"]}, {"required": ["codeServerArgs"]}],
                "properties": {"name": _STR, "image": _IMAGE, "port": _INT,
                               "dagsterApiGrpcArgs": {"type": "array", "items": _STR},
                               "envConfigMaps": _NAMED, "envSecrets": _NAMED, "resources": _RESOURCES}}}}},
        "runLauncher": {
            "type": "object", "required": ["type", "config"], "additionalProperties": False,
            "properties": {
                "type": {"enum": ["CeleryK8sRunLauncher", "K8sRunLauncher", "CustomRunLauncher"]},
                "config": {"type": "object", "properties": {"k8sRunLauncher": {
                    "type": "object", "additionalProperties": False,
                    "required": ["imagePullPolicy", "loadInclusterConfig", "envConfigMaps", "envSecrets", "envVars",
                                 "volumeMounts", "volumes"],
                    "properties": {
                        "image": {"anyOf": [_IMAGE, {"type": "null"}]}, "imagePullPolicy": _IMAGE["properties"][
                            "pullPolicy"], "jobNamespace": {"type": ["string", "null"]},
                        "loadInclusterConfig": _BOOL, "kubeconfigFile": {"type": ["string", "null"]},
                        "envConfigMaps": _NAMED, "envSecrets": _NAMED, "envVars": {"type": "array", "items": _STR},
                        "volumeMounts": {"type": "array"}, "volumes": {"type": "array"},
                        "labels": {"type": ["object", "null"]}, "failPodOnRunFailure": {"type": ["boolean", "null"]},
                        "resources": {"type": ["object", "null"]}, "schedulerName": {"type": ["string", "null"]},
                        "securityContext": {"type": ["object", "null"]},
                        "runK8sConfig": {"type": "object", "additionalProperties": False, "properties": {
                            k: {"type": ["object", "null"]} for k in (
                                "containerConfig", "podSpecConfig", "podTemplateSpecMetadata", "jobSpecConfig",
                                "jobMetadata")}}}}}}},
            "allOf": [{"if": {"properties": {"type": {"const": "K8sRunLauncher"}}},
                       "then": {"properties": {"config": {"required": ["k8sRunLauncher"]}}}}]},
        "postgresql": {"type": "object", "properties": {
            "enabled": _BOOL, "postgresqlHost": _STR, "postgresqlUsername": _STR, "postgresqlPassword": _STR,
            "postgresqlDatabase": _STR, "service": {"type": "object", "required": ["port"],
                                                    "properties": {"port": _INT}}}},
        "generatePostgresqlPasswordSecret": _BOOL,
        "dagsterDaemon": {"type": "object", "properties": {
            "runCoordinator": {
                "type": "object", "required": ["enabled", "type", "config"], "additionalProperties": False,
                "properties": {"enabled": _BOOL, "type": {"enum": ["QueuedRunCoordinator", "CustomRunCoordinator"]},
                               "config": {"type": "object", "properties": {"queuedRunCoordinator": {
                                   "type": "object", "additionalProperties": False, "properties": {
                                       "maxConcurrentRuns": {"type": ["integer", "object", "null"]},
                                       "tagConcurrencyLimits": {"type": ["array", "null"], "items": _TAG_LIMIT},
                                       "dequeueIntervalSeconds": {"type": ["integer", "object", "null"]},
                                       "dequeueNumWorkers": {"type": ["integer", "object", "null"]},
                                       "dequeueUseThreads": {"type": ["boolean", "null"]},
                                       "blockOpConcurrencyLimitedRuns": {"type": ["object", "null"]}}}}}}},
            "runMonitoring": {"type": "object"}, "resources": _RESOURCES}},
        "dagsterWebserver": {"type": "object", "properties": {"resources": _RESOURCES}},
        "additionalInstanceConfig": {"type": "object"},
        "telemetry": {"type": "object", "required": ["enabled"], "additionalProperties": False,
                      "properties": {"enabled": _BOOL}},
    },
}


def _values():
    return yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())


def test_helm_values_fit_the_chart_schema_and_a_broken_copy_does_not():
    values = _values()
    jsonschema.validate(values, CHART_SCHEMA)
    broken = _values()
    broken["runLauncher"]["config"]["k8sRunLauncher"]["resource"] = {}  # a typo the chart refuses
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, CHART_SCHEMA)
    broken = _values()
    broken["runLauncher"]["type"] = "K8sLauncher"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, CHART_SCHEMA)


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
        "run_coordinator": {"module": "dagster.core.run_coordinator", "class": "QueuedRunCoordinator", "config": {
            "max_concurrent_runs": queue["maxConcurrentRuns"],
            "tag_concurrency_limits": queue["tagConcurrencyLimits"]}},
        "run_monitoring": {"enabled": True, "start_timeout_seconds": 300, "poll_interval_seconds": 30,
                           "free_slots_after_run_end_seconds": 60},
        **_values()["additionalInstanceConfig"],
    }
    assert process_config(dagster_instance_config_schema(), config).success
    bad = {**config, "concurrency": {"pools": {"default_limit": "one"}}}
    assert not process_config(dagster_instance_config_schema(), bad).success


def test_runs_ask_kubernetes_for_resources_by_kind_of_work(tmp_path):
    defs = build_definitions(load_settings(str(tmp_path)))
    ingest, catalog = defs.resolve_job_def(INGEST_JOB), defs.resolve_job_def(CATALOG_JOB)
    assert ingest.tags[WORK_TAG] == "ingest" and catalog.tags[WORK_TAG] == "catalog"
    import json

    def memory_gib(tags):
        value = json.loads(tags[K8S_CONFIG_TAG])["container_config"]["resources"]["requests"]["memory"]
        return float(value[:-2]) / (1024 if value.endswith("Mi") else 1)

    default_pod = _values()["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]["containerConfig"]
    assert memory_gib(ingest.tags) > memory_gib({K8S_CONFIG_TAG: json.dumps({"container_config": default_pod})})
    assert memory_gib(ingest.tags) > memory_gib(catalog.tags)
    assert set(RUN_RESOURCES) == {"ingest", "catalog"}


def test_the_image_installs_the_deploy_extra_and_checks_the_model_is_inside():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "'.[deploy]'" in dockerfile and any(d.startswith("dagster-k8s") for d in extras["deploy"])
    assert "default_embedder()" in dockerfile  # the build fails if the model is not in the image


def test_the_committed_local_instance_config_is_the_one_new_roots_get_and_dagster_accepts_it():
    from dagster._config import process_config
    from dagster._core.instance.config import dagster_instance_config_schema

    from ingest_pipeline.instance import DAGSTER_YAML

    committed = (ROOT / "data" / "dagster_home" / "dagster.yaml").read_text()
    assert committed == DAGSTER_YAML
    assert process_config(dagster_instance_config_schema(), yaml.safe_load(committed)).success
