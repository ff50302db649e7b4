"""Flux in a Job on real kubelets: fluence-flux's webhook handler starts the brokers as pods.

The user writes an ordinary Indexed Job with the ``flux`` annotation. The webhook adds
the flux-view init container (tests/cluster/overlay names the local image as the view),
the broker config, the headless Service and one Fluence gang; the brokers find each
other through the cluster DNS, rank 0 submits the user's command across every broker and
its log holds every task's output. ``pytest -s`` shows it.
"""

from __future__ import annotations

import re

import pytest
import yaml

from fluence_core import names

from tests.cluster.harness import Cluster, list_pods, show_pods

pytestmark = pytest.mark.timeout(900)

FLUX_IMAGE = "localhost/fluence-local/fluence:0.1.0"
"""The user's image: any image with flux-core's runtime libraries and Python modules does
(the flux commands come from the view); this one is on every node already."""
RANKS = 4
TASK_LINE = re.compile(r"^task (\d+) of (\d+) brokers on (\S+)$")


def flux_job(name: str, ranks: int) -> str:
    """An Indexed Job asking for Flux: every task prints its rank, the instance's size and
    its host (the pod's hostname, ``<job>-<index>``)."""
    return yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "annotations": {names.FLUX_ANNOTATION: "true"}},
        "spec": {
            "completionMode": "Indexed", "completions": ranks, "parallelism": ranks,
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "work", "image": FLUX_IMAGE,
                    "command": ["sh", "-c", 'echo "task $FLUX_TASK_RANK of '
                                '$(flux getattr size) brokers on $(hostname)"'],
                    # 4 x 600m: more than either node holds, so the instance spans both.
                    "resources": {"requests": {"cpu": "600m", "memory": "128Mi"}}}]}}}})


def test_flux_brokers_started_by_the_webhook_form_one_instance_and_run_a_job_on_every_rank(
        cluster: Cluster) -> None:
    namespace = cluster.namespace("flux")
    cluster.apply(flux_job("flux", RANKS), namespace)
    job = cluster.get("-n", namespace, "job", "flux")
    template = job["spec"]["template"]["spec"]
    print(f"\nJob as stored: schedulerName={template['schedulerName']} "
          f"subdomain={template.get('subdomain')} "
          f"init={[c['name'] for c in template.get('initContainers', [])]}")
    assert template["schedulerName"] == names.SCHEDULER_NAME
    done = cluster.run("-n", namespace, "wait", "--for=condition=Complete", "job/flux",
                       "--timeout=480s", timeout=500, check=False)
    pods = list_pods(cluster, namespace)
    print("Flux brokers (Indexed Job of 4, 600m each):")
    show_pods(pods)
    rank0 = next(p["metadata"]["name"] for p in pods
                 if p["metadata"]["annotations"].get(names.JOB_COMPLETION_INDEX)
                 == "0")
    log = cluster.logs(namespace, rank0, "-c", "work")
    print("rank 0's log:\n  " + log.strip().replace("\n", "\n  "))
    assert done.returncode == 0, f"the Flux Job did not complete: {done.stderr.strip()}"
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"] * RANKS
    node_of = {p["spec"]["hostname"]: p["spec"]["nodeName"] for p in pods}
    assert set(node_of.values()) == {"node-1", "node-2"}
    tasks = [m.groups() for m in map(TASK_LINE.match, log.splitlines()) if m]
    # One task per broker, each in a different pod, all of one instance of RANKS brokers.
    assert sorted(int(rank) for rank, _, _ in tasks) == list(range(RANKS))
    assert {size for _, size, _ in tasks} == {str(RANKS)}
    assert {host for _, _, host in tasks} == set(node_of)
