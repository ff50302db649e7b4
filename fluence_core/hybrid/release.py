"""Releasing a shared group's workers: stamp what the scout learned on each, then ungate it.

The stamp carries the scout's outcome, task id and session, and the scout's backend
annotations (the backend and its inherited attributes, as the scheduler wrote them
on the scout, or, for a scout that holds its QPU by claim, as its claim's device
says: :func:`~fluence_core.hybrid.claims.claimed_backend`). The workers'
``FLUXION_BACKEND`` / ``FLUXION_<ATTR>`` read those annotations through the downward
API, so when a worker's containers start they
submit into the scout's session on the scout's backend. The stamp and the gate's
removal are one JSON patch per worker, so no worker runs unstamped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fluence_core import names
from fluence_core.hybrid.claims import claimed_backend
from fluence_core.kube.api import PODS, TERMINAL_PHASES, ClusterAPI, KubeObject
from fluence_core.kube.errors import ApiError, NotFound
from fluence_core.kube.meta import (
    annotations_of, job_controller_reference, labels_of, metadata_of,
)
from fluence_core.log import logger

PATCH_ATTEMPTS = 5


def backend_annotations(scout: Mapping[str, Any]) -> dict[str, str]:
    """The scout's backend and attribute annotations (empty before the scheduler placed it)."""
    return {
        key: str(value)
        for key, value in annotations_of(scout).items()
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
    if not metadata_of(pod).get("annotations"):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": dict(annotations)})
    else:
        ops.extend({"op": "add", "path": f"/metadata/annotations/{_pointer(k)}", "value": v}
                   for k, v in annotations.items())
    index = gates.index(gate)
    ops.append({"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": gate})
    ops.append({"op": "remove", "path": f"/spec/schedulingGates/{index}"})
    return ops


def controlling_job(pod: Mapping[str, Any]) -> str | None:
    """The uid of the Job that controls ``pod`` (its owner reference with ``controller:
    true``), None without one.

    Why the Job and not the labels: a bare pod a tenant labelled as group ``vqe``'s scout,
    with a container named like the sidecar and a token bound to it, must not release
    Job vqe's workers or stamp them with its own backend. A scout and its workers are the
    pods of one Indexed Job (the quantum split needs its completion indexes): only
    pods that Job controls, by uid, are each other's siblings. A uid cannot be guessed
    from a name, and a tenant cannot make another team's Job control its pod.
    """
    job = job_controller_reference(pod)
    return str(job["uid"]) if job is not None else None


def workers_of(cluster: ClusterAPI, scout: Mapping[str, Any]) -> list[KubeObject]:
    """The scout's workers: the pods its own controlling Job (by uid) controls in its
    namespace that Fluence's split marked as workers (role label); none for a scout no
    Job controls."""
    meta = metadata_of(scout)
    group = labels_of(scout).get(names.GROUP_LABEL)
    job = controlling_job(scout)
    if not group or job is None:
        return []
    listed = cluster.list(PODS, meta.get("namespace"),
                          label_selector=f"{names.GROUP_LABEL}={group},"
                                         f"{names.ROLE_LABEL}={names.ROLE_WORKER}")
    return [
        pod for pod in listed.items
        if metadata_of(pod).get("uid") != meta.get("uid")
        and metadata_of(pod).get("name") != meta.get("name")
        and labels_of(pod).get(names.ROLE_LABEL) == names.ROLE_WORKER
        and controlling_job(pod) == job
    ]


def running(workers: list[KubeObject]) -> list[str]:
    """Names of the workers not finished yet."""
    return [p["metadata"]["name"] for p in workers
            if (p.get("status") or {}).get("phase") not in TERMINAL_PHASES]


def ungate(cluster: ClusterAPI, pod: KubeObject, gate: str,
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
            logger.info("ungating %s/%s: the pod is gone", namespace, name)
            return False
        except ApiError as error:  # the gate list moved under us: read again
            logger.info("ungating %s raced (%s); retrying", name, error)
            fresh = cluster.get(PODS, name, namespace)
            if fresh is None:
                logger.info("ungating %s/%s: the pod is gone", namespace, name)
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
    return release_workers(cluster, workers_of(cluster, scout), gate, annotations)


def release_workers(cluster: ClusterAPI, workers: list[KubeObject], gate: str,
                    annotations: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Stamp and ungate each of ``workers`` still behind ``gate``: (ungated now, still running).

    The report endpoint passes a scout's workers; the orphan sweep
    (:mod:`fluence_core.hybrid.orphans`) the gated workers of a scout that is gone.
    """
    done = [w["metadata"]["name"] for w in workers if ungate(cluster, w, gate, annotations)]
    return done, running(workers)


# -- the scout's reports (docs/scout-report.md) --------------------------------------------

REPORT_EVENTS = (names.REPORT_FOUND, names.REPORT_RELEASE, names.REPORT_FINAL)
RELEASE_STATUSES = (names.SCOUT_STATUS_READY, names.SCOUT_STATUS_NO_RESULT,
                    names.SCOUT_STATUS_NOT_FOUND)
FINAL_STATUSES = (*RELEASE_STATUSES, names.SCOUT_STATUS_OBSERVED)
MAX_FIELD = 1024
"""Characters a report's job id or session may have (they become annotation values)."""


class BadReport(ValueError):
    """A report that is not what docs/scout-report.md describes; the message names the field."""


@dataclass(frozen=True)
class Report:
    """One report of a scout's sidecar."""

    event: str
    status: str | None = None
    job_id: str | None = None
    session: str | None = None
    position: int | None = None
    workers_finished: bool | None = None

    def payload(self) -> dict[str, Any]:
        """The JSON body, as the sidecar sends it."""
        body: dict[str, Any] = {"event": self.event}
        for key, value in (("status", self.status), ("jobId", self.job_id),
                           ("session", self.session), ("position", self.position),
                           ("workersFinished", self.workers_finished)):
            if value is not None:
                body[key] = value
        return body


def _text(body: Mapping[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_FIELD:
        raise BadReport(f"{key!r} must be a non-empty string of at most {MAX_FIELD} characters")
    return value


def parse_report(body: object) -> Report:
    """The report in a decoded JSON body; :class:`BadReport` names what is wrong."""
    if not isinstance(body, Mapping):
        raise BadReport("the body must be a JSON object")
    event = body.get("event")
    if event not in REPORT_EVENTS:
        raise BadReport(f"'event' must be one of {', '.join(REPORT_EVENTS)}, not {event!r}")
    status = _text(body, "status")
    allowed = {names.REPORT_RELEASE: RELEASE_STATUSES, names.REPORT_FINAL: FINAL_STATUSES}
    if event in allowed and status not in allowed[event]:
        raise BadReport(f"'status' of a {event} report must be one of "
                        f"{', '.join(allowed[event])}, not {status!r}")
    position = body.get("position")
    if position is not None and (type(position) is not int or not 0 <= position < 2**31):
        raise BadReport(f"'position' must be a queue position (an integer >= 0), not {position!r}")
    finished = body.get("workersFinished")
    if finished is not None and not isinstance(finished, bool):
        raise BadReport(f"'workersFinished' must be true or false, not {finished!r}")
    return Report(str(event), status, _text(body, "jobId"), _text(body, "session"), position,
                  finished)


def apply_report(cluster: ClusterAPI, scout: Mapping[str, Any], report: Report,
                 gate: str) -> dict[str, Any]:
    """Act on a report from ``scout`` (already known to be the group's scout): the reply."""
    meta = metadata_of(scout)
    where = f"{meta.get('namespace')}/{meta.get('name')}"
    own: dict[str, str] = {}
    if report.job_id:
        own[names.SCOUT_JOB_ID_ANNOTATION] = report.job_id
    if report.session:
        own[names.SCOUT_SESSION_ANNOTATION] = report.session
    reply: dict[str, Any] = {"ok": True}
    if report.event == names.REPORT_FOUND:
        if report.position is not None:
            own[names.SCOUT_QUEUE_POSITION_ANNOTATION] = str(report.position)
        logger.info("scout %s found its task %s (queue position %s)", where, report.job_id,
                    report.position)
    elif report.event == names.REPORT_RELEASE:
        assert report.status is not None
        own[names.SCOUT_STATUS_ANNOTATION] = report.status
        stamped = stamp(scout, report.status, report.job_id, report.session)
        if names.BACKEND_ANNOTATION not in stamped:
            stamped.update(claimed_backend(cluster, scout))
        ungated, still = release(cluster, scout, gate, stamped)
        reply.update(ungated=ungated, running=still)
        if ungated:
            logger.info("scout %s (%s): released %s", where, report.status, ", ".join(ungated))
    else:
        assert report.status is not None
        own[names.SCOUT_STATUS_ANNOTATION] = report.status
        logger.info("scout %s finished: %s (workers finished: %s)", where, report.status,
                    report.workers_finished)
    if own:
        cluster.patch(PODS, str(meta.get("name")), {"metadata": {"annotations": own}},
                      meta.get("namespace"))
    return reply
