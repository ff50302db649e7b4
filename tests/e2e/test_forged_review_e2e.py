"""Issue 32, attack 1, on a real API server: a forged AdmissionReview POSTed straight to the
webhook's port changes nothing in the cluster.

The webhook runs as ``fluence webhook`` runs it (the built-in handlers and plugins, the
background writer, the informers and the controller acting on stored objects). A tenant
who can reach its port POSTs reviews for another team's namespace: a gang pod and a Job
asking for a PodGroup of minCount 999, and a Flux Job asking for a ConfigMap, Secret and
Service. Nothing is made there; the team's real Job is admitted and gets its own
PodGroup of 4, made from the stored Job.
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from pathlib import Path
from typing import Any

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.settings import load_settings
from fluence_core.testing import make_pod_dict
from fluence_core.testing_apiserver import ensure_namespace, wait_for, webhook_beside

INSECURE = ssl.create_default_context()
INSECURE.check_hostname = False
INSECURE.verify_mode = ssl.CERT_NONE  # a hostile client checks nothing


def _job(name: str, size: int, **annotations: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "annotations": annotations},
            "spec": {"completionMode": "Indexed", "parallelism": size, "completions": size,
                     "template": {"metadata": {"labels": {names.GROUP_LABEL: name}},
                                  "spec": {"schedulerName": names.SCHEDULER_NAME,
                                           "restartPolicy": "Never",
                                           "containers": [{"name": "app", "image": "busybox",
                                                           "command": ["sleep", "1"]}]}}}}


def _forge(port: int, namespace: str, obj: dict[str, Any], resource: str,
           group: str = "") -> dict[str, Any]:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "forged", "operation": "CREATE", "namespace": namespace,
                          "kind": {"group": group, "version": "v1", "kind": obj["kind"]},
                          "resource": {"group": group, "version": "v1", "resource": resource},
                          "object": obj}}
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=INSECURE, timeout=30)
    try:
        connection.request("POST", "/mutate", body=json.dumps(review).encode(),
                           headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        return json.loads(answer.read())["response"]
    finally:
        connection.close()


def test_a_forged_review_for_another_namespace_creates_nothing_there(
        kube: KubeCluster, kube_namespace: str, tmp_path: Path) -> None:
    victim = ensure_namespace(kube, f"{kube_namespace}-victim")
    settings = load_settings(webhook_config=f"fluence-forged-{kube_namespace}",
                             runtime_image="example.org/fluence:e2e")
    with webhook_beside(kube, settings, tmp_path / "tls", namespace=victim,
                        resources=("pods", "jobs")) as server:
        gang_pod = make_pod_dict("g-0", None, namespace=None,
                                 labels={names.GROUP_LABEL: "train"},
                                 annotations={names.GROUP_SIZE_ANNOTATION: "999"})
        answers = [
            _forge(server.port, victim, gang_pod, "pods"),
            _forge(server.port, victim, _job("train", 999), "jobs", "batch"),
            _forge(server.port, victim, _job("sim", 2, **{names.FLUX_ANNOTATION: "true"}),
                   "jobs", "batch"),
        ]
        assert all(a["allowed"] for a in answers), answers  # answered, as any review
        time.sleep(3)  # what the webhook would have made by now, it made
        assert kube.list("podgroups", victim).items == []
        for plural in ("configmaps", "secrets", "services"):  # the API server makes its own
            made = [o["metadata"]["name"] for o in kube.list(plural, victim).items
                    if (o["metadata"].get("labels") or {}).get(names.MANAGED_BY_LABEL)
                    == names.SCHEDULER_NAME or o["metadata"]["name"].startswith("sim")]
            assert made == [], (plural, made)
        kube.create("jobs", _job("train", 4), victim)  # the team's real Job
        group = wait_for(lambda: kube.get("podgroups", "train", victim),
                         "the real Job's PodGroup, made from the stored Job")
        assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
        kube.delete("jobs", "train", victim, propagation="Background")
