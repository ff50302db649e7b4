"""Releasing a shared group's workers: stamp what the scout learned on each, then ungate it.

The stamp carries the scout's outcome, task id and session, and the scout's backend
annotations (the backend and its inherited attributes, as the scheduler wrote them
on the scout). The workers' ``FLUXION_BACKEND`` / ``FLUXION_<ATTR>`` read those
annotations through the downward API, so when a worker's containers start they
submit into the scout's session on the scout's backend. The stamp and the gate's
removal are one JSON patch per worker, so no worker runs unstamped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fluence_core import names
from fluence_core.cluster_api import PODS, ClusterAPI, KubeDict
from fluence_core.kube_errors import ApiError, NotFound
from fluence_core.log import logger

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
PATCH_ATTEMPTS = 5


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def backend_annotations(scout: Mapping[str, Any]) -> dict[str, str]:
    """The scout's backend and attribute annotations (empty before the scheduler placed it)."""
    return {
        key: str(value)
        for key, value in (_meta(scout).get("annotations") or {}).items()
        if key == names.BACKEND_ANNOTATION or key.startswith(names.ATTR_ANNOTATION_PREFIX)
    }


def stamp(scout: Mapping[str, Any], outcome: str, job_id: str | None = None,
          session: str | None = None) -> dict[str, str]:
    """The annotations every worker gets at release."""
    annotations = {names.SCOUT_STATUS_ANNOTATION: outcome}
    if job_id:
        annotations[names.SCOUT_JOB_ID_ANNOTATION] = job_id
    if session:
        annotations[names.SCOUT_SESSION_ANNOTATION] = session
    annotations.update(backend_annotations(scout))
    return annotations


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def ungate_patch(
    pod: Mapping[str, Any], gate: str, annotations: Mapping[str, str]
) -> list[dict[str, Any]] | None:
    """The JSON patch stamping ``annotations`` and removing exactly ``gate``; None if the pod
    lacks it.

    The ``test`` op pins the gate's index, so a concurrent change to the gate
    list makes the patch fail instead of removing some other gate.
    """
    gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
    if gate not in gates:
        return None
    ops: list[dict[str, Any]] = []
    if not _meta(pod).get("annotations"):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": dict(annotations)})
    else:
        ops.extend({"op": "add", "path": f"/metadata/annotations/{_pointer(k)}", "value": v}
                   for k, v in annotations.items())
    index = gates.index(gate)
    ops.append({"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": gate})
    ops.append({"op": "remove", "path": f"/spec/schedulingGates/{index}"})
    return ops


def _controller(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    for ref in _meta(pod).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind")), str(ref.get("uid"))
    return None


def workers_of(cluster: ClusterAPI, scout: Mapping[str, Any]) -> list[KubeDict]:
    """The scout's workers: its group's other pods in its namespace, not scouts, and under the
    scout's own controller (the Job) when it has one."""
    meta = _meta(scout)
    group = (meta.get("labels") or {}).get(names.GROUP_LABEL)
    if not group:
        return []
    controller = _controller(scout)
    listed = cluster.list(PODS, meta.get("namespace"),
                          label_selector=f"{names.GROUP_LABEL}={group}")
    return [
        pod for pod in listed.items
        if _meta(pod).get("uid") != meta.get("uid") and _meta(pod).get("name") != meta.get("name")
        and (_meta(pod).get("labels") or {}).get(names.ROLE_LABEL) != names.ROLE_SCOUT
        and (controller is None or _controller(pod) == controller)
    ]


def running(workers: list[KubeDict]) -> list[str]:
    """Names of the workers not finished yet."""
    return [p["metadata"]["name"] for p in workers
            if (p.get("status") or {}).get("phase") not in TERMINAL_PHASES]


def ungate(cluster: ClusterAPI, pod: KubeDict, gate: str,
           annotations: Mapping[str, str]) -> bool:
    """Stamp ``pod`` and remove ``gate`` (re-reading it when the gate list moved); True if
    this call ungated it."""
    namespace, name = pod["metadata"].get("namespace"), pod["metadata"]["name"]
    for _attempt in range(PATCH_ATTEMPTS):
        ops = ungate_patch(pod, gate, annotations)
        if ops is None:
            return False
        try:
            cluster.patch(PODS, name, ops, namespace, patch_type="json")
        except NotFound:
            return False
        except ApiError as error:  # the gate list moved under us: read again
            logger.info("ungating %s raced (%s); retrying", name, error)
            fresh = cluster.get(PODS, name, namespace)
            if fresh is None:
                return False
            pod = fresh
            continue
        logger.info("ungated %s/%s (%s)", namespace, name,
                    annotations.get(names.SCOUT_STATUS_ANNOTATION))
        return True
    return False


def release(cluster: ClusterAPI, scout: Mapping[str, Any], gate: str,
            annotations: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Stamp and ungate every worker of ``scout`` still behind ``gate``: (ungated now, still
    running)."""
    workers = workers_of(cluster, scout)
    done = [w["metadata"]["name"] for w in workers if ungate(cluster, w, gate, annotations)]
    return done, running(workers)
