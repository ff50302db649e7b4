"""ServiceAccounts for the admission-policy tests: a tenant, and Fluence's own.

Policies judge who sends a request; these tests send requests as the accounts a real
cluster has, not as the session's admin.
"""

from __future__ import annotations

import subprocess

import pytest

from fluence_core.kube.api import Resource
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.errors import Conflict
from fluence_core.testing_apiserver import ApiServer, find_kubectl, wait_for

ACCESS_REVIEWS = Resource("selfsubjectaccessreviews", "SelfSubjectAccessReview",
                          group="authorization.k8s.io", namespaced=False)


def account_cluster(apiserver: ApiServer, namespace: str, account: str,
                    where: str) -> KubeCluster:
    """Logged in as ServiceAccount ``namespace/account``, once it may edit pods in ``where``:
    on a fresh server the controller manager fills the aggregated ``edit`` role a moment
    after it starts, and until then its binding grants nothing."""
    kubectl = find_kubectl()
    if kubectl is None:
        pytest.skip("no kubectl beside the API server binaries (kubectl create token)")
    done = subprocess.run([str(kubectl), f"--kubeconfig={apiserver.kubeconfig()}", "-n",
                           namespace, "create", "token", account], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    cluster = KubeCluster.from_token(apiserver.url, done.stdout.strip(),
                                     ca_file=apiserver.ca_file, qps=1000, burst=1000)
    question = {"spec": {"resourceAttributes": {"namespace": where, "verb": "patch",
                                                "resource": "pods"}}}
    wait_for(lambda: cluster.create(ACCESS_REVIEWS, question)["status"].get("allowed"),
             f"{account} to be allowed to edit pods in {where}", timeout=30)
    return cluster


def bind_account(kube: KubeCluster, namespace: str, name: str, role: str, where: str, *,
                 kind: str = "ClusterRole") -> None:
    """ServiceAccount ``namespace/name`` bound to ``kind`` ``role`` in namespace ``where``."""
    try:
        kube.create("serviceaccounts", {"metadata": {"name": name}}, namespace)
    except Conflict:
        pass
    kube.create("rolebindings", {
        "metadata": {"name": f"{name}-{role}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}, where)


TENANT_RULES = [
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]},
    {"apiGroups": ["batch"], "resources": ["jobs"],
     "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]},
]
"""What a tenant may do to pods and Jobs in its namespace, as ``edit`` grants it, spelled out:
``edit`` is filled by the controller manager's aggregation, which a bare API server lacks."""


def tenant_role(kube: KubeCluster, namespace: str, name: str = "tenant") -> str:
    """Role ``name`` in ``namespace`` with :data:`TENANT_RULES`; its name."""
    kube.create("roles", {"metadata": {"name": name}, "rules": TENANT_RULES}, namespace)
    return name
