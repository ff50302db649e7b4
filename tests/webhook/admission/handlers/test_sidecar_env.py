"""The scout's sidecar gets the app's credentials (references only) and every setting it reads."""

from __future__ import annotations

from typing import Any

import pytest

from webhook_helpers import admit, container, shared

from fluence_core import names
from fluence_core.kube.fake import FakeCluster
from fluence_core.settings import SCOUT, SIDECAR, Settings, SettingsVariables, env_names, readers_of
from fluence_core.hybrid.split import QuantumSplitHandler
from fluence_core.webhook.admission.review import AdmissionService

AWS = [{"secretRef": {"name": "aws-creds"}}, {"configMapRef": {"name": "tuning"}}]
APP_ENV = [
    {"name": "AWS_REGION", "value": "us-east-1"},
    {"name": "QISKIT_IBM_TOKEN",
     "valueFrom": {"secretKeyRef": {"name": "ibm-quantum", "key": "token"}}},
    {"name": "OTHER", "valueFrom": {"secretKeyRef": {"name": "unrelated", "key": "x"}}},
    {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
    {"name": names.ENV_POD_UID, "value": "app-says-otherwise"},
]


def scout(annotation: str | None = None, **kw: Any) -> dict[str, Any]:
    obj = shared("qj-0", 0, **kw)
    app = obj["spec"]["containers"][0]
    app["env"], app["envFrom"] = [dict(e) for e in APP_ENV], [dict(e) for e in AWS]
    if annotation is not None:
        obj["metadata"]["annotations"][names.SIDECAR_CREDENTIALS_ANNOTATION] = annotation
    return obj


def sidecar_of(service: AdmissionService, obj: dict[str, Any]) -> tuple[dict, dict]:
    response, out = admit(service, obj)
    assert response["allowed"], response
    return response, container(out, names.SIDECAR_CONTAINER)


def by_name(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in entries}


def test_by_default_the_sidecar_gets_the_apps_env_and_env_from_references(service):
    _, sidecar = sidecar_of(service, scout())
    assert sidecar["envFrom"] == AWS
    env = by_name(sidecar["env"])
    assert env["AWS_REGION"] == {"name": "AWS_REGION", "value": "us-east-1"}
    assert env["QISKIT_IBM_TOKEN"] == APP_ENV[1]
    assert env["OTHER"] == APP_ENV[2]
    # The app's limits, not the sidecar's: the reference names the app container.
    assert env["CPU_LIMIT"]["valueFrom"]["resourceFieldRef"]["containerName"] == "app"


def test_the_sidecars_own_variables_are_never_replaced_by_the_apps(service):
    _, sidecar = sidecar_of(service, scout())
    uid = [e for e in sidecar["env"] if e["name"] == names.ENV_POD_UID]
    assert uid == [{"name": names.ENV_POD_UID,
                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}}]


def test_the_annotation_narrows_the_copy_to_named_secrets(service):
    _, sidecar = sidecar_of(service, scout("aws-creds, ibm-quantum"))
    assert sidecar["envFrom"] == [{"secretRef": {"name": "aws-creds"}}]
    env = by_name(sidecar["env"])
    assert env["QISKIT_IBM_TOKEN"] == APP_ENV[1]
    assert not {"AWS_REGION", "OTHER", "CPU_LIMIT"} & set(env)


def test_a_named_key_of_a_secret_read_whole_becomes_one_reference(service):
    obj = scout("ibm/token,ibm-quantum/token")
    obj["spec"]["containers"][0]["envFrom"] = [
        {"prefix": "IBM_", "secretRef": {"name": "ibm", "optional": True}}
    ]
    _, sidecar = sidecar_of(service, obj)
    assert "envFrom" not in sidecar
    env = by_name(sidecar["env"])
    assert env["IBM_token"] == {"name": "IBM_token", "valueFrom": {
        "secretKeyRef": {"name": "ibm", "key": "token", "optional": True}}}
    assert env["QISKIT_IBM_TOKEN"] == APP_ENV[1]


def test_none_gives_the_sidecar_nothing_of_the_app(service):
    _, sidecar = sidecar_of(service, scout(" None "))
    assert "envFrom" not in sidecar
    assert not {"AWS_REGION", "QISKIT_IBM_TOKEN", "OTHER"} & set(by_name(sidecar["env"]))


def test_a_secret_the_app_does_not_read_is_not_given_and_the_user_is_told(service):
    response, sidecar = sidecar_of(service, scout("aws-creds,stolen,unrelated/y"))
    assert sidecar["envFrom"] == [{"secretRef": {"name": "aws-creds"}}]
    assert not any("stolen" in str(e) or "'y'" in str(e) for e in sidecar["env"])
    warnings = " ".join(response.get("warnings") or [])
    assert "'stolen'" in warnings and "key 'y' of Secret 'unrelated'" in warnings


@pytest.mark.parametrize("bad", ["aws-creds,", "Aws", "a/b/c", "a/", "x y"])
def test_a_bad_annotation_is_refused_naming_it(service, bad):
    response, _ = admit(service, scout(bad))
    assert not response["allowed"]
    message = response["status"]["message"]
    assert names.SIDECAR_CREDENTIALS_ANNOTATION in message and "handler quantum" in message


def test_the_container_asking_for_the_qpu_is_the_one_copied(service):
    obj = scout()
    obj["spec"]["containers"].insert(0, {
        "name": "logger", "image": "busybox", "env": [{"name": "LOGGER_ONLY", "value": "1"}]})
    _, sidecar = sidecar_of(service, obj)
    assert "LOGGER_ONLY" not in by_name(sidecar["env"]) and sidecar["envFrom"] == AWS


class Recording(FakeCluster):
    """The in-memory cluster, noting every kind read."""

    def __init__(self) -> None:
        super().__init__()
        self.read: list[str] = []

    def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        self.read.append(str(getattr(resource, "plural", resource)))
        return super().get(resource, name, namespace)

    def list(self, resource: Any, namespace: str | None = None, **kw: Any) -> Any:
        self.read.append(str(getattr(resource, "plural", resource)))
        return super().list(resource, namespace, **kw)


def test_the_webhook_reads_no_secret(settings, config):
    cluster = Recording()
    service = AdmissionService(settings, [QuantumSplitHandler(settings)], cluster=cluster,
                               resource_config=config)
    _, sidecar = sidecar_of(service, scout())
    assert sidecar["envFrom"] == AWS and cluster.read and "secrets" not in cluster.read


def test_every_setting_the_sidecar_and_scout_read_reaches_the_pod(config):
    settings = Settings(worker_timeout=900, session_hold_timeout=300, sidecar_poll_interval=2.5,
                        ungate_position=3, find_task_timeout=120, observe_only=True,
                        log_level="debug", disable_plugins=["acme"], report_ca="PEM OF A CA")
    cluster = FakeCluster()
    service = AdmissionService(settings, [QuantumSplitHandler(settings)], cluster=cluster,
                               resource_config=config)
    response, out = admit(service, shared("qj-0", 0))
    sidecar = by_name(container(out, names.SIDECAR_CONTAINER)["env"])
    app = by_name(container(out, "app")["env"])
    assert sidecar["FLUENCE_WORKER_TIMEOUT"]["value"] == "900.0"
    assert sidecar["FLUENCE_SIDECAR_POLL_INTERVAL"]["value"] == "2.5"
    assert sidecar["FLUENCE_UNGATE_POSITION"]["value"] == "3"
    assert sidecar["FLUENCE_FIND_TASK_TIMEOUT"]["value"] == "120.0"
    assert sidecar["FLUENCE_OBSERVE_ONLY"]["value"] == "true"
    assert sidecar["FLUENCE_LOG_LEVEL"]["value"] == "DEBUG"
    assert sidecar["FLUENCE_DISABLE_PLUGINS"]["value"] == "acme"
    assert app["FLUENCE_SESSION_HOLD_TIMEOUT"]["value"] == "300.0"
    assert sidecar["FLUENCE_REPORT_CA"]["value"] == "PEM OF A CA"
    assert sidecar["FLUENCE_REPORT_URL"]["value"] == (
        f"https://fluence-webhook.fluence-system.svc:8444{names.REPORT_PATH}")
    assert sidecar["FLUENCE_REPORT_TOKEN_FILE"]["value"] == (
        f"{names.REPORT_TOKEN_MOUNT}/{names.REPORT_TOKEN_FILE}")
    for field, info in SettingsVariables.model_fields.items():
        variable = env_names(SettingsVariables, field)[0]
        per_pod = (info.json_schema_extra or {}).get("per_pod")  # type: ignore[union-attr]
        for component, env in ((SIDECAR, sidecar), (SCOUT, app)):
            if component in readers_of(SettingsVariables, field):
                assert variable in env, f"{variable} (read by the {component}) is not in its env"
                if not per_pod and getattr(settings.variables, field) not in (None, []):
                    assert env[variable]["value"]  # the webhook's own value


def test_settings_written_into_the_pod_read_back_to_the_webhooks_values(config):
    settings = Settings(worker_timeout=900, ungate_position=3, observe_only=True,
                        disable_plugins=["acme", "b"])
    cluster = FakeCluster()
    service = AdmissionService(settings, [QuantumSplitHandler(settings)], cluster=cluster,
                               resource_config=config)
    _, out = admit(service, shared("qj-0", 0))
    values = {e["name"]: e["value"] for e in container(out, names.SIDECAR_CONTAINER)["env"]
              if "value" in e and e["name"].startswith(names.SETTINGS_ENV_PREFIX)}
    known = SettingsVariables.model_fields
    read = Settings(**{k[len(names.SETTINGS_ENV_PREFIX):].lower(): v for k, v in values.items()
                       if k[len(names.SETTINGS_ENV_PREFIX):].lower() in known})
    for field in ("worker_timeout", "ungate_position", "observe_only", "disable_plugins",
                  "sidecar_poll_interval", "find_task_timeout", "quantum_gate"):
        assert getattr(read.variables, field) == getattr(settings.variables, field), field
