"""The ``fluxion-env`` handler: a pod asking for a virtual resource reads what the scheduler
chose from the downward API, and keeps the env it has."""

from __future__ import annotations

from webhook_helpers import admit, container, env_of, pod

from fluence_core import names


def annotation_ref(annotation: str) -> str:
    return f"metadata.annotations['{annotation}']"



# -- fluxion-env ---------------------------------------------------------------


def test_fluxion_env_gives_a_virtual_container_backend_and_attribute_env(service):
    response, out = admit(service, pod("q", qpu=1))
    assert response["allowed"]
    env = env_of(container(out, "app"))
    assert env[names.ENV_BACKEND] == annotation_ref(names.BACKEND_ANNOTATION)
    assert env["FLUXION_REGION"] == annotation_ref(names.attr_annotation("region"))
    assert env["FLUXION_DEVICE_ARN"] == annotation_ref(names.attr_annotation("device-arn"))


def test_fluxion_env_leaves_a_classical_pod_alone(service):
    response, out = admit(service, pod("c"))
    assert response["allowed"] and "patch" not in response
    assert "env" not in container(out, "app")


def test_fluxion_env_keeps_user_env_and_adds_only_what_is_missing(service):
    obj = pod("q", qpu=1)
    obj["spec"]["containers"][0]["env"] = [
        {"name": "A", "value": "1"},
        {"name": names.ENV_BACKEND, "value": "mine"},
    ]
    _, out = admit(service, obj)
    env = env_of(container(out, "app"))
    assert env["A"] == "1" and env[names.ENV_BACKEND] == "mine" and "FLUXION_REGION" in env
