"""Build AdmissionReviews, send them through a service, apply the patch with jsonpatch."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch

from fluence_core import names
from fluence_core.kube.errors import ApiError
from fluence_core.testing import job_owner, make_pod_dict
from fluence_core.webhook.admission.review import AdmissionService

QPU = names.extended_resource("qpu")


def pod(name: str = "p", *, group: str | None = None, cpu: str = "1", qpu: int = 0,
        annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
        index: int | None = None, job: str | None = None, namespace: str = "default",
        scheduler: str = names.SCHEDULER_NAME, **spec: Any) -> dict[str, Any]:
    """A pod as a tenant sends it to admission: ``group`` is its group *label*, ``qpu`` the
    QPUs it requests, ``index`` its completion index (label and annotation, as the job
    controller writes it) and ``job`` the Job controlling it (uid ``job-uid``)."""
    indexed = {} if index is None else {names.JOB_COMPLETION_INDEX: str(index)}
    return make_pod_dict(
        name, cpu, extra={QPU: str(qpu)} if qpu else None, namespace=namespace,
        labels={**(labels or {}), **({names.GROUP_LABEL: group} if group else {}), **indexed},
        annotations={**(annotations or {}), **indexed}, scheduler=scheduler,
        owners=[job_owner(job, "job-uid")] if job else None, image="python:3.12", **spec)


def shared(
    name: str, index: int, *, group: str = "qj", job: str | None = "qj", **kw: Any
) -> dict[str, Any]:
    return pod(name, group=group, qpu=1, index=index, job=job,
               annotations={names.COORDINATION_ANNOTATION: names.COORDINATION_SHARED}, **kw)


def review(
    obj: Any,
    *,
    operation: str = "CREATE",
    namespace: str = "default",
    dry_run: bool = False,
    uid: str = "req-1",
    resource: str = "pods",
) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": resource},
                        "operation": operation, "namespace": namespace, "dryRun": dry_run,
                        "object": obj}}


def decode_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    if "patch" not in response:
        return []
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


def admit(
    service: AdmissionService, obj: dict[str, Any], **kw: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(response, the pod after applying the patch with the jsonpatch library).

    An allowed pod is then stored as the API server would (unless a dry run, or
    ``store=False``), and the webhook's controller hears of it, as from its pod informer:
    what the pod needs (its PodGroup) is made from the stored pod (written by the
    service's background writer when it has one: call ``writer.flush()``)."""
    store = kw.pop("store", True)
    outcome = service.review(json.dumps(review(obj, **kw)).encode())
    assert outcome.status == 200
    response = outcome.body["response"]
    assert response["uid"] == kw.get("uid", "req-1")
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), decode_patch(response))
    if store and response["allowed"] and not kw.get("dry_run"):
        stored_pod(service, patched, kw.get("namespace", "default"))
    return response, patched


def stored_pod(service: AdmissionService, obj: dict[str, Any],
               namespace: str = "default") -> dict[str, Any] | None:
    """Store ``obj`` in the service's (fake) cluster, as the API server does after admission,
    and tell the controller; None when there is no cluster or it is stored already."""
    cluster = getattr(service.cluster, "inner", service.cluster)  # past a Counting wrapper
    if cluster is None or not obj.get("metadata", {}).get("name"):
        return None
    body = copy.deepcopy(obj)
    body["metadata"]["namespace"] = namespace
    try:
        stored = cluster.create("pods", body, namespace)
    except ApiError:  # there already, or no such namespace
        return None
    service.controller.pod_stored("ADDED", stored)
    return stored


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    """name -> value, or the annotation a downward-API variable reads."""
    out: dict[str, Any] = {}
    for entry in container.get("env") or []:
        if "value" in entry:
            out[entry["name"]] = entry["value"]
        else:
            out[entry["name"]] = entry["valueFrom"]["fieldRef"]["fieldPath"]
    return out


def container(obj: dict[str, Any], name: str, section: str = "containers") -> dict[str, Any]:
    return next(c for c in obj["spec"].get(section) or [] if c["name"] == name)


class Counting:
    """The cluster boundary, recording every call that would reach the API server."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def __getattr__(self, verb: str) -> Any:
        method = getattr(self.inner, verb)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(f"{verb} {getattr(args[0], 'plural', args[0])}")
            return method(*args, **kwargs)
        return counted
