"""The webhook's informers on a real kube-apiserver, as the account deploy/webhook.yaml
gives it: its ClusterRole lets them list and watch PodGroups and Jobs (issue 20: admission
looks objects up instead of reading them), and without those rights they say "unknown"
(callers read) and log the refusal. Skipped without KUBEBUILDER_ASSETS or kubectl."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.manifests import read_objects
from fluence_core.testing_apiserver import ApiServer, wait_for
from fluence_core.webhook.controller.informer import RETRY_SECONDS, watched_for
from fluence_core.webhook.controller.pod_groups import pod_group_body
from tests.e2e.test_hostile_webhook_e2e import no_rights_cluster

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_the_deployed_role_lets_the_informers_list_and_watch(
        apiserver: ApiServer, kube: KubeCluster, kube_namespace: str,
        caplog: pytest.LogCaptureFixture) -> None:
    ns = kube_namespace
    account = no_rights_cluster(apiserver, kube, ns, "webhook")
    watched = watched_for(account)
    caplog.set_level(logging.WARNING, logger=names.LOGGER_NAME)
    [role] = [r for r in read_objects(ROOT / "deploy/webhook.yaml", "ClusterRole")
              if r["metadata"]["name"] == "fluence-webhook"]
    name = f"fluence-webhook-{ns}"
    try:
        for informer in watched.informers():
            informer.start()
        wait_for(lambda: "watching podgroups failed" in caplog.text
                 and "watching jobs failed" in caplog.text, "both informers refused (403)")
        assert not any(informer.synced for informer in watched.informers())
        assert watched.pod_groups is not None and watched.jobs is not None
        assert watched.pod_groups.lookup(ns, "g") == (False, None)  # unknown: callers read
        kube.create("clusterroles", {**role, "metadata": {"name": name}})
        kube.create("clusterrolebindings", {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "webhook", "namespace": ns}]})
        for informer in watched.informers():
            assert informer.wait_synced(30), f"{informer.resource.plural} never synced"
        kube.create("podgroups", pod_group_body("g", ns, 3), ns)
        kube.create("jobs", {"metadata": {"name": "j", "labels": {names.GROUP_LABEL: "g"}},
                             "spec": {"template": {
                                 "metadata": {"labels": {names.GROUP_LABEL: "g"}},
                                 "spec": {"restartPolicy": "Never", "containers": [
                                     {"name": "c", "image": "busybox"}]}}}}, ns)
        found = wait_for(lambda: watched.pod_groups.lookup(ns, "g")[1],  # type: ignore[union-attr]
                         "the PodGroup, delivered by the watch")
        assert found["spec"]["schedulingPolicy"]["gang"]["minCount"] == 3
        job = wait_for(lambda: watched.jobs.lookup(ns, "j")[1],  # type: ignore[union-attr]
                       "the labelled Job, delivered by the watch")
        assert job["metadata"]["uid"] == kube.get("jobs", "j", ns)["metadata"]["uid"]
        caplog.clear()  # a watch the role did not allow would fail, unsync and log again
        time.sleep(3 * RETRY_SECONDS)
        assert all(informer.synced for informer in watched.informers())
        assert "failed" not in caplog.text, caplog.text
    finally:
        for informer in watched.informers():
            informer.stop()
        kube.delete("clusterrolebindings", name)
        kube.delete("clusterroles", name)
        account.close()
