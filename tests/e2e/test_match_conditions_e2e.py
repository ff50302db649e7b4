"""The pod webhook's generated matchConditions change nothing but which pods are sent.

One table of pod kinds is created in two namespaces on a real kube-apiserver:
one whose webhook is registered with the conditions the installed handlers
declare (published as ``fluence webhook`` does at start), one whose webhook is
sent every pod. The stored pods, the refusals and the PodGroups must be the
same; and the first webhook must have been sent exactly the kinds some handler
needs, so the API server's own CEL is what is checked here (the unit tests
check the same conditions with cel-python). Grouped Jobs go through the jobs
webhook in both, as deployed, and their pods are created as the job controller
makes them (suspended Jobs: the test makes the pods). Skipped without
KUBEBUILDER_ASSETS.
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.errors import ApiError
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import Settings, load_settings
from fluence_core.testing import indexed_job_pods, make_pod_dict
from fluence_core.testing_apiserver import PROBE_POD, ensure_namespace, wait_for, webhook_beside
from fluence_core.webhook import BackgroundWriter, build_service
from fluence_core.webhook.admission.review import AdmissionService

pytestmark = pytest.mark.e2e

QPU = names.extended_resource("qpu")


def _pod(name: str, *, labels: dict[str, str] | None = None,
         annotations: dict[str, str] | None = None, qpu: bool = False,
         scheduler: str = names.SCHEDULER_NAME, **spec: Any) -> dict[str, Any]:
    """A 100m pod, asking for a QPU (requested and limited) with ``qpu``."""
    quantum = {QPU: "1"} if qpu else None
    return make_pod_dict(name, "100m", extra=quantum, limits=quantum, namespace=None,
                         labels=labels or {}, annotations=annotations, scheduler=scheduler,
                         **spec)


G = names.GROUP_LABEL
SHARED = {names.COORDINATION_ANNOTATION: names.COORDINATION_SHARED,
          names.GROUP_SIZE_ANNOTATION: "2"}

# name -> (pod, sent to the webhook with the generated conditions?)
BARE: dict[str, tuple[dict[str, Any], bool]] = {
    "plain": (_pod("plain"), False),
    "other-scheduler": (_pod("other-scheduler", scheduler="default-scheduler",
                             annotations={names.PROTECTED_ANNOTATION: "true"}), False),
    "theirs": (_pod("theirs", labels={G: "t"}, schedulingGroup={"podGroupName": "theirs"}),
               False),
    "independent": (_pod("independent", annotations={
        names.COORDINATION_ANNOTATION: names.COORDINATION_INDEPENDENT}), False),
    "grouped": (_pod("grouped", labels={G: "g"},
                     annotations={names.GROUP_SIZE_ANNOTATION: "2"}), True),
    "quantum": (_pod("quantum", qpu=True), True),
    "forged-protected": (_pod("forged-protected", annotations={
        names.PROTECTED_ANNOTATION: "true"}), True),
    "forged-promised": (_pod("forged-promised", annotations={
        names.PROMISED_CORES_ANNOTATION: "64"}), True),
    "forged-role": (_pod("forged-role", labels={names.ROLE_LABEL: names.ROLE_WORKER}), True),
    "bad-group": (_pod("bad-group", labels={G: "Bad_Group"}), True),
    "bad-coordination": (_pod("bad-coordination", annotations={
        names.COORDINATION_ANNOTATION: "both"}), True),
    "scout": (_pod("scout", qpu=True, annotations=SHARED,
                   labels={G: "q", names.JOB_COMPLETION_INDEX: "0"}), True),
    "worker": (_pod("worker", qpu=True, annotations=SHARED,
                    labels={G: "q", names.JOB_COMPLETION_INDEX: "1"}), True),
    "stamped-no-job": (_pod("stamped-no-job", labels={G: "s"},
                            schedulingGroup={"podGroupName": "s"}), True),
}
# Job name -> (template group-size annotation or None, its pods sent?)
JOBS: dict[str, tuple[str | None, bool]] = {"jg": (None, False), "jsized": ("2", False),
                                           "jbad": ("0", True)}


def _job(name: str, size: str | None) -> dict[str, Any]:
    made = _pod("x", labels={G: name},
                annotations={names.GROUP_SIZE_ANNOTATION: size} if size else {})
    template = {"metadata": {key: made["metadata"][key] for key in ("labels", "annotations")},
                "spec": {**made["spec"], "restartPolicy": "Never"}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"suspend": True, "parallelism": 2, "completions": 2,
                     "completionMode": "Indexed", "template": template}}


class Recording:
    """The service's answers, with the name of every pod it was sent."""

    def __init__(self, service: AdmissionService) -> None:
        self.seen: list[str] = []
        inner = service.review

        def review(body: bytes) -> Any:
            request = json.loads(body).get("request") or {}
            name = ((request.get("object") or {}).get("metadata") or {}).get("name", "?")
            if (request.get("resource") or {}).get("resource") == "pods" and name != PROBE_POD:
                self.seen.append(name)  # not webhook_beside's probe: the table's pods
            return inner(body)
        service.review = review  # type: ignore[method-assign]


@contextlib.contextmanager
def _webhook(kube: KubeCluster, settings: Settings, workdir: Path, namespace: str,
             generated: bool) -> Iterator[Recording]:
    service = build_service(settings, get_plugin_manager(settings), kube,
                            writer=BackgroundWriter())
    recording = Recording(service)
    with webhook_beside(kube, settings, workdir, namespace=namespace, resources=("pods", "jobs"),
                        service=service, match_conditions=generated):
        yield recording


def _stored(pod: dict[str, Any], namespace: str) -> dict[str, Any]:
    """What admission decided, without what differs between namespaces or runs."""
    meta = pod["metadata"]
    spec = copy.deepcopy(pod["spec"])
    spec["volumes"] = [v for v in spec.get("volumes") or []
                       if not v["name"].startswith("kube-api-access-")]
    for section in ("containers", "initContainers"):
        for container in spec.get(section) or []:
            container["volumeMounts"] = [m for m in container.get("volumeMounts") or []
                                         if not m["name"].startswith("kube-api-access-")]
    for ref in meta.get("ownerReferences") or []:
        ref.pop("uid", None)
    labels = {key: value for key, value in (meta.get("labels") or {}).items()
              if key not in ("controller-uid", "batch.kubernetes.io/controller-uid")}
    annotations = meta.get("annotations")
    if annotations and names.SPLIT_SEAL_ANNOTATION in annotations:  # keyed by each webhook
        annotations = {**annotations, names.SPLIT_SEAL_ANNOTATION: "<seal>"}
    return json.loads(json.dumps({"labels": labels,
                                  "annotations": annotations,
                                  "owners": meta.get("ownerReferences"), "spec": spec})
                      .replace(namespace, "<ns>"))


def _create(kube: KubeCluster, pod: dict[str, Any], namespace: str) -> tuple[str, Any]:
    try:
        return "stored", _stored(kube.create("pods", copy.deepcopy(pod), namespace), namespace)
    except ApiError as error:
        return "refused", (error.status, error.message.replace(namespace, "<ns>"))


def _pod_groups(kube: KubeCluster, namespace: str) -> dict[str, Any]:
    """Fluence's PodGroups (the job controller makes its own, with random names, for the Job
    Fluence left unnamed, in both namespaces alike)."""
    return {g["metadata"]["name"]: g["spec"]["schedulingPolicy"]
            for g in kube.list("podgroups", namespace).items
            if (g["metadata"].get("labels") or {}).get(names.MANAGED_BY_LABEL)
            == names.SCHEDULER_NAME}


def test_generated_conditions_send_only_the_pods_a_handler_needs_and_change_no_outcome(
        kube: KubeCluster, kube_namespace: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    # admission control judges one cluster-wide budget, which the two namespaces would
    # share; its condition is checked by the unit tests, its marks here
    monkeypatch.setenv("FLUENCE_ADMISSION_CONTROL", "off")
    with_ns = kube_namespace
    without_ns = ensure_namespace(kube, f"{with_ns}-all")
    outcomes: dict[str, dict[str, Any]] = {}
    seen: dict[str, list[str]] = {}
    expected_sent: set[str] = set()
    for namespace, generated in ((with_ns, True), (without_ns, False)):
        settings = load_settings(webhook_config=f"fluence-mc-{namespace}", report_ca="TEST CA")
        with _webhook(kube, settings, tmp_path / namespace, namespace, generated) as recording:
            results: dict[str, Any] = {}
            for name, (pod, sent) in BARE.items():
                results[name] = _create(kube, pod, namespace)
                if sent:
                    expected_sent.add(name)
            for job_name, (size, sent) in JOBS.items():
                job = kube.create("jobs", _job(job_name, size), namespace)
                for index in range(2):
                    made = indexed_job_pods(job)[index]
                    # as the job controller writes it: the Job's foreground deletion
                    # waits for the pod
                    made["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = True
                    results[made["metadata"]["name"]] = _create(kube, made, namespace)
                    if sent:
                        expected_sent.add(made["metadata"]["name"])
            outcomes[namespace] = results
            seen[namespace] = recording.seen
            # the background writer has made every PodGroup once the webhook is closed
        groups_with = wait_for(lambda: _pod_groups(kube, namespace) or None,
                               f"PodGroups in {namespace}")
        outcomes[namespace]["<podgroups>"] = groups_with
        for pod in kube.list("pods", namespace).items:  # its quantum pods' promises would
            # weigh on the admission budget of every later test on this shared server
            kube.delete("pods", pod["metadata"]["name"], namespace, grace_period_seconds=0)
    for name in outcomes[with_ns]:
        assert outcomes[with_ns][name] == outcomes[without_ns][name], name
    # the table exercises every outcome: patched, untouched, refused
    verdicts = {kind for kind, _ in (v for k, v in outcomes[with_ns].items() if k[0] != "<")}
    assert verdicts == {"stored", "refused"}
    for forged in ("forged-protected", "forged-promised"):
        assert outcomes[with_ns][forged][1]["annotations"] in (None, {})
    assert outcomes[with_ns]["grouped"][1]["spec"]["schedulingGroup"] == {"podGroupName": "g"}
    assert outcomes[with_ns]["jg-0"][1]["spec"]["schedulingGroup"] == {"podGroupName": "jg"}
    assert {"jg", "jsized"} <= set(outcomes[with_ns]["<podgroups>"])
    # every Fluence pod reached the unconditioned webhook, and only the needed ones the other
    fluence_pods = {name for name in outcomes[without_ns]
                    if name not in ("other-scheduler", "<podgroups>")}
    assert fluence_pods <= set(seen[without_ns])
    assert set(seen[with_ns]) == expected_sent
