"""Fluence installed from deploy/ on a real two-kubelet cluster, running real pods.

Each test prints what it saw (pod phases and nodes, node capacity, the workers'
FLUXION_BACKEND lines); ``pytest -s tests/cluster`` shows it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

import pytest
import yaml

from fluence_core import names
from fluence_core.quantity import parse_quantity

from tests.cluster.harness import (
    BRAKET_ARCHIVE,
    IMAGES,
    REPO,
    WORKLOAD_IMAGE,
    Cluster,
    PodWatch,
    container_pid,
    is_ready,
    list_pods,
    show_pods,
    wait,
)

pytestmark = pytest.mark.timeout(1200)
SYSTEM = "fluence-system"
FAILOVER_GANG = 24
"""Pods in the gang whose leader is killed: binding them all takes long enough (one API
call each, in order) for a kill sent on the first bind to land before the last."""


def _capacity(cluster: Cluster) -> dict[str, dict[str, int]]:
    """Each node's virtual types and their counts (the API writes 1000 as "1k")."""
    return {node["metadata"]["name"]: {k: int(parse_quantity(v))
                                       for k, v in node["status"]["capacity"].items()
                                       if k.startswith(names.RESOURCE_DOMAIN)}
            for node in cluster.get("nodes")["items"]}


def gang_job(name: str, size: int, cpu: str, seconds: int = 3) -> str:
    """An Indexed Job of ``size`` grouped pods for Fluence, each printing where it ran."""
    return yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed", "completions": size, "parallelism": size,
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {names.GROUP_LABEL: name}},
                "spec": {
                    "schedulerName": names.SCHEDULER_NAME, "restartPolicy": "Never",
                    "containers": [{
                        "name": "work", "image": WORKLOAD_IMAGE,
                        "command": ["sh", "-c",
                                    f'echo "rank $JOB_COMPLETION_INDEX on $NODE"; sleep {seconds}'],
                        "env": [{"name": "NODE",
                                 "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                        "resources": {"requests": {"cpu": cpu, "memory": "32Mi"}}}]}}}})


def test_the_scheduler_webhook_device_plugins_and_qpu_driver_become_ready(
        cluster: Cluster) -> None:
    pods = list_pods(cluster, SYSTEM)
    print("\nfluence-system after kubectl apply -k tests/cluster/overlay:")
    show_pods(pods)
    apps: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        apps.setdefault(pod["metadata"]["labels"]["app.kubernetes.io/name"], []).append(pod)
    assert sorted((app, len(found)) for app, found in apps.items()) == [
        ("fluence", 2), ("fluence-device-plugin", 2), ("fluence-qpu-driver", 1),
        ("fluence-qpu-kubelet-plugin", 2), ("fluence-webhook", 1)]
    assert all(is_ready(pod) for pod in pods)
    for daemon in ("fluence-device-plugin", "fluence-qpu-kubelet-plugin"):
        assert {p["spec"]["nodeName"] for p in apps[daemon]} == {"node-1", "node-2"}
    assert {c["image"] for p in pods for c in p["spec"]["containers"]} == {
        "localhost/fluence-local/fluence:0.1.0"}


def test_the_scheduler_holds_its_lease_in_cluster(cluster: Cluster) -> None:
    scheduler_pods = {p["metadata"]["name"] for p in
                      list_pods(cluster, SYSTEM, "-l", "app.kubernetes.io/name=fluence")}
    lease = wait(lambda: cluster.get("-n", SYSTEM, "lease", "fluence-scheduler"),
                 "the scheduler's Lease", timeout=60)
    print(f"\nLease {SYSTEM}/fluence-scheduler held by {lease['spec']['holderIdentity']}")
    assert lease["spec"]["holderIdentity"] in scheduler_pods


def test_the_api_server_reaches_the_webhook_through_its_service(cluster: Cluster) -> None:
    namespace = cluster.namespace("webhook-path")
    service = cluster.get("-n", SYSTEM, "service", "fluence-webhook")
    cluster.apply(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "single", "labels": {names.GROUP_LABEL: "single"},
                     "annotations": {names.GROUP_SIZE_ANNOTATION: "1"}},
        "spec": {"schedulerName": names.SCHEDULER_NAME, "restartPolicy": "Never",
                 "containers": [{"name": "c", "image": WORKLOAD_IMAGE,
                                 "command": ["true"],
                                 "resources": {"requests": {"cpu": "10m"}}}]}}), namespace)
    pod = cluster.get("-n", namespace, "pod", "single")
    print(f"\nwebhook Service {service['spec']['clusterIP']}:443; the pod as stored: "
          f"schedulingGroup={pod['spec'].get('schedulingGroup')}")
    # Only the webhook (reached through the Service, the one clientConfig) sets it.
    assert pod["spec"].get("schedulingGroup", {}).get("podGroupName") == "single"
    done = wait(lambda: (p := cluster.get("-n", namespace, "pod", "single"))["status"].get(
        "phase") in ("Succeeded", "Failed") and p, "the single pod to finish")
    print(f"  phase {done['status']['phase']} on {done['spec'].get('nodeName')}")
    assert done["status"]["phase"] == "Succeeded"


def test_a_gang_of_four_runs_on_both_nodes_and_completes(cluster: Cluster) -> None:
    namespace = cluster.namespace("gang")
    # 4 x 600m = 2.4 CPUs: more than either node's 2, so the gang must span both.
    cluster.apply(gang_job("gang", 4, "600m"), namespace)
    cluster.run("-n", namespace, "wait", "--for=condition=Complete", "job/gang",
                "--timeout=240s", timeout=260)
    pods = list_pods(cluster, namespace)
    print("\ngang of 4 (Indexed Job, 600m each):")
    show_pods(pods)
    assert [p["status"]["phase"] for p in pods] == ["Succeeded"] * 4
    assert {p["spec"]["nodeName"] for p in pods} == {"node-1", "node-2"}
    group = cluster.get("-n", namespace, "podgroup", "gang")
    assert group["spec"]["schedulingPolicy"]["gang"]["minCount"] == 4
    for pod in pods:
        line = cluster.logs(namespace, pod["metadata"]["name"]).strip()
        print(f"  {line}")
        assert line.endswith(f"on {pod['spec']['nodeName']}")


def test_each_kubelet_advertises_the_virtual_types_and_follows_the_configmap(
        cluster: Cluster) -> None:
    domain = names.RESOURCE_DOMAIN
    expected = {f"{domain}/{t}": 1000 for t in ("qdevice", "qpu", "qubit")}
    capacity = wait(lambda: (c := _capacity(cluster)) and all(
        v == expected for v in c.values()) and c, "every node to advertise qdevice/qpu/qubit",
        timeout=120)
    print(f"\nnode capacity from the device plugin: {json.dumps(capacity, indent=1)}")
    original = cluster.get("-n", SYSTEM, "configmap", "fluence-resources")
    config = yaml.safe_load(original["data"]["resources.yaml"])
    config["resources"].append({"type": "licence", "name": "solver", "count": 4})
    edited = {**original, "data": {"resources.yaml": yaml.safe_dump(config)}}
    try:
        cluster.run("replace", "-f", "-", input=json.dumps(edited))
        after = wait(lambda: (c := _capacity(cluster)) and all(
            v.get(f"{domain}/licence") == 1000 for v in c.values()) and c,
            "every node to advertise the added licence type", timeout=240, every=2)
        print(f"after adding type licence to the ConfigMap: {json.dumps(after, indent=1)}")
    finally:
        current = cluster.get("-n", SYSTEM, "configmap", "fluence-resources")
        current["data"] = original["data"]
        cluster.run("replace", "-f", "-", input=json.dumps(current))


def _holder(cluster: Cluster) -> str:
    lease = cluster.get("-n", SYSTEM, "lease", "fluence-scheduler")
    return str(lease["spec"].get("holderIdentity") or "")


def test_the_braket_example_runs_on_its_local_simulator_scout_then_ungated_workers(
        cluster: Cluster) -> None:
    if not (IMAGES / BRAKET_ARCHIVE).is_file():
        pytest.skip(f"the QAOA example's image is not built ({IMAGES / BRAKET_ARCHIVE}: "
                    "tests/cluster/images.sh braket archives)")
    original = cluster.get("-n", SYSTEM, "configmap", "fluence-resources")
    local = (REPO / "config" / "resources-local.yaml").read_text()
    cluster.run("replace", "-f", "-", input=json.dumps(
        {**original, "data": {"resources.yaml": local}}))
    try:
        # The scheduler follows edits of the mounted file, but when depends on the kubelet's
        # ConfigMap sync (up to a minute or more, and an edit undone within it is never
        # seen); restarted, it reads this one at once (the live edit: the test above, and
        # tests/cli/test_up.py on the kubelet's file layout).
        old = {p["metadata"]["name"]
               for p in list_pods(cluster, SYSTEM, "-l", "app.kubernetes.io/name=fluence")}
        cluster.run("-n", SYSTEM, "rollout", "restart", "deployment/fluence")
        cluster.run("-n", SYSTEM, "rollout", "status", "deployment/fluence",
                    "--timeout=180s", timeout=200)
        leader = wait(lambda: (h := _holder(cluster)) not in old and h,
                      "a restarted scheduler to lead", timeout=120)
        graph = wait(lambda: [line for line in cluster.logs(SYSTEM, leader).splitlines()
                              if "graph:" in line], f"{leader} to build its graph", timeout=60)
        print(f"\n{leader}: {graph[0]}")
        namespace = cluster.namespace("qaoa")
        job = yaml.safe_load((REPO / "examples" / "braket-qaoa" / "job.yaml").read_text())
        # The example asks 2 CPUs a pod for a group of 4 (8 CPUs). Here both kubelets report
        # the same 2-core host (the kubelet reports the cores it sees; system-reserved and
        # kube-reserved only subtract), and each node's device-plugin pod holds 10m, so not
        # one pod of 2 CPUs fits anywhere. At 200m, admission control counts a whole core a
        # pod: 4 cores less Fluence's own pods' 620m leave 3 whole cores, and a group of 4
        # is refused (shown below, in a namespace of its own). So: a scout and two workers,
        # 200m each.
        requests = job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
        assert (requests["cpu"], job["spec"]["completions"]) == ("2", 4)  # as shipped
        requests.update(cpu="200m", memory="512Mi")
        refused_in = cluster.namespace("qaoa-of-4")
        cluster.apply(yaml.safe_dump(job), refused_in)
        refusal = wait(lambda: [e["message"] for e in
                                cluster.get("-n", refused_in, "events")["items"]
                                if e["reason"] == "FailedCreate"
                                and "admission control" in e["message"]],
                       "the group of 4 to be refused", timeout=60)
        print(f"\nthe example's group of 4 at 200m: {refusal[0]}")
        assert "needs 4 cores (4 pods x 1)" in refusal[0]
        cluster.run("delete", "namespace", refused_in, "--wait=false")
        job["spec"].update(completions=3, parallelism=3)
        cluster.apply(yaml.safe_dump(job), namespace)
        cluster.run("-n", namespace, "wait", "--for=condition=Complete", "job/qaoa",
                    "--timeout=360s", timeout=380)
        pods = list_pods(cluster, namespace)
        print("\nQAOA on the Braket LocalSimulator (Indexed Job of 3, coordination shared):")
        show_pods(pods)
        roles = {p["metadata"]["name"]: p["metadata"]["labels"].get(names.ROLE_LABEL)
                 for p in pods}
        (scout,) = [p for p in pods if roles[p["metadata"]["name"]] == names.ROLE_SCOUT]
        workers = [p for p in pods if roles[p["metadata"]["name"]] == names.ROLE_WORKER]
        assert len(workers) == 2
        assert all(p["status"]["phase"] == "Succeeded" for p in pods)
        status = scout["metadata"]["annotations"].get(names.SCOUT_STATUS_ANNOTATION)
        print(f"  scout {scout['metadata']['name']}: {names.SCOUT_STATUS_ANNOTATION}={status}")
        print("  " + cluster.logs(namespace, scout["metadata"]["name"], "-c", "app")
              .strip().replace("\n", "\n  "))
        assert status == names.SCOUT_STATUS_READY  # the sidecar's report was accepted
        for worker in workers:
            assert not worker["spec"].get("schedulingGates")
            line = cluster.logs(namespace, worker["metadata"]["name"], "-c", "app").strip()
            report = json.loads(line.splitlines()[-1])
            print(f"  worker {worker['metadata']['name']}: FLUXION_BACKEND={report['backend']} "
                  f"scout_task={report['scout_task']}")
            assert report["backend"] == "braket_local"
            assert report["scout_task"]
    finally:
        current = cluster.get("-n", SYSTEM, "configmap", "fluence-resources")
        current["data"] = original["data"]
        cluster.run("replace", "-f", "-", input=json.dumps(current))


def test_a_gang_survives_its_leader_being_killed_between_two_of_its_binds(
        cluster: Cluster) -> None:
    namespace = cluster.namespace("failover")
    holder = _holder(cluster)
    (leader,) = list_pods(cluster, SYSTEM, "--field-selector", f"metadata.name={holder}")
    pid = container_pid(leader)
    size = FAILOVER_GANG
    # Started before the Job exists: the first pod with a node is the first bind.
    with PodWatch(cluster, namespace) as watch:
        cluster.apply(gang_job("survivor", size, "100m", seconds=5), namespace)
        first = watch.first_bound(timeout=240)
        # SIGKILL on the host: no grace, so the leader stops between two binds of the gang.
        os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    cluster.run("-n", SYSTEM, "delete", "pod", holder, "--grace-period=0", "--force",
                "--wait=false")
    # A bind already sent when the process died may still land; the Lease outlives that.
    time.sleep(2)
    before = list_pods(cluster, namespace)
    bound_by_old = sorted(p["metadata"]["name"] for p in before if p["spec"].get("nodeName"))
    print(f"\nsaw {first} bound, SIGKILLed the leader {holder} (pid {pid} on the host): "
          f"{len(bound_by_old)} of {size} pods bound by then")
    assert 0 < len(bound_by_old) < size, "the kill did not land while the gang was binding"
    cluster.run("-n", namespace, "wait", "--for=condition=Complete", "job/survivor",
                "--timeout=300s", timeout=320)
    new_holder = _holder(cluster)
    print(f"gang complete {time.monotonic() - killed_at:.0f} s after the kill; Lease held by "
          f"{new_holder}")
    after = list_pods(cluster, namespace)
    show_pods(after)
    assert len(after) == size  # none lost, none replaced
    assert {p["metadata"]["uid"] for p in after} == {p["metadata"]["uid"] for p in before}
    assert [p["status"]["phase"] for p in after] == ["Succeeded"] * size
    assert {p["spec"]["nodeName"] for p in after} == {"node-1", "node-2"}
    assert new_holder != holder
    binders = {e["involvedObject"]["name"]: e.get("reportingInstance")
               for e in cluster.get("-n", namespace, "events")["items"]
               if e["reason"] == "Scheduled"}
    finished_by_new = sorted(n for n, by in binders.items() if by == new_holder)
    print(f"  bound after the handover by {new_holder}: {finished_by_new}")
    assert set(finished_by_new) == {p["metadata"]["name"] for p in after} - set(bound_by_old)
    wait(lambda: [p for p in list_pods(cluster, SYSTEM, "-l", "app.kubernetes.io/name=fluence")
                  if is_ready(p) and p["metadata"]["name"] != holder][1:],
         "the Deployment to have two ready replicas again", timeout=180)
    replicas = list_pods(cluster, SYSTEM, "-l", "app.kubernetes.io/name=fluence")
    print(f"  scheduler pods now: {[p['metadata']['name'] for p in replicas]}")
