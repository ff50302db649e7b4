"""Jobs, JobSets and a review round trip for the flux handler tests."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch

from fluence_core.api import Reconciler, names
from fluence_core.testing import AdmissionService

JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def pod_template(command: list[str] | None = None, args: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "app", "image": "ubuntu:22.04"}
    if command is not None:
        container["command"] = command
    if args is not None:
        container["args"] = args
    return {"spec": {"restartPolicy": "Never", "containers": [container]}}


def job(name: str = "lmp", *, nodes: int = 4, annotations: dict[str, str] | None = None,
        command: list[str] | None = None, args: list[str] | None = None, flux: bool = True,
        **spec: Any) -> dict[str, Any]:
    notes = {names.FLUX_ANNOTATION: "true"} if flux else {}
    notes.update(annotations or {})
    body = {"completionMode": "Indexed", "completions": nodes, "parallelism": nodes,
            "template": pod_template(["lmp", "-in", "in.lj"] if command is None else command, args)}
    body.update(spec)
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "annotations": notes}, "spec": body}


def jobset(name: str = "train", *, nodes: int = 2, annotations: dict[str, str] | None = None,
           labels: dict[str, str] | None = None, replicated: list[dict[str, Any]] | None = None,
           owner: dict[str, Any] | None = None) -> dict[str, Any]:
    node = {"name": "node", "replicas": 1, "template": {"spec": {
        "completionMode": "Indexed", "completions": nodes, "parallelism": nodes,
        "template": pod_template(["python3", "train.py"])}}}
    meta: dict[str, Any] = {"name": name, "namespace": "default",
                            "annotations": dict(annotations or {}), "labels": dict(labels or {})}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": meta,
            "spec": {"replicatedJobs": replicated if replicated is not None else [node]}}


def review(obj: Any, *, group: str, resource: str, operation: str = "CREATE",
           dry_run: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "req-1",
            "resource": {"group": group, "version": "v1", "resource": resource},
            "operation": operation,
            "namespace": "default",
            "dryRun": dry_run,
            "object": obj,
        },
    }


def admit(
    service: AdmissionService, obj: dict[str, Any], **kw: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(response, the object after applying the patch with the jsonpatch library).

    An allowed object is then stored as the API server would (not on a dry run, nor with
    ``store=False``; one of the same name stored already is replaced), and the service's
    controller hands it to the handlers that reconcile stored objects, as from their
    informer: what the workload needs is made from the stored object."""
    store = kw.pop("store", True)
    if obj.get("kind") == "JobSet":
        kw.setdefault("group", "jobset.x-k8s.io")
        kw.setdefault("resource", "jobsets")
    else:
        kw.setdefault("group", "batch")
        kw.setdefault("resource", "jobs")
    outcome = service.review(json.dumps(review(obj, **kw)).encode())
    assert outcome.status == 200
    response = outcome.body["response"]
    patch = json.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    patched = jsonpatch.apply_patch(copy.deepcopy(obj), patch)
    if store and response["allowed"] and not kw.get("dry_run") and service.cluster is not None:
        stored_workload(service, patched)
    return response, patched


def stored_workload(service: AdmissionService, obj: dict[str, Any]) -> dict[str, Any]:
    """Store ``obj`` (replacing one of its name) and hand it to the reconciling handlers."""
    cluster = service.cluster
    assert cluster is not None
    plural = "jobsets" if obj.get("kind") == "JobSet" else "jobs"
    name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace", "default")
    cluster.delete(plural, name, namespace)
    stored = cluster.create(plural, obj, namespace)
    for handler in service.handlers:
        if isinstance(handler, Reconciler):
            service.controller.stored(handler, stored)
    return stored
