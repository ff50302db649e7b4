"""Issue 32, attacks 2 and 3, on a real API server with deploy/admission-policy.yaml applied.

A tenant (a ServiceAccount that may edit its namespace) forged a record at CREATE
(``allocation`` on its own pod: restored after a restart, the pod bound against its
nodeSelector and two nodes withheld), protected its pod from preemption with
``kubectl annotate``, and removed a live scout's role label so the orphan sweep
released its workers. With the policy (bound to this test's namespace only: the
session's other tests run the scheduler as the admin, which the policy would refuse):

* a CREATE carrying a key only Fluence writes is refused, unless Fluence's webhook
  admitted the pod: it strips those keys, and validation runs after mutation;
* an UPDATE setting, changing or removing a Fluence-owned annotation or the role label
  is refused from the tenant, and allowed from Fluence's own ServiceAccount.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fluence_core import names
from fluence_core.kube.api import Resource
from fluence_core.kube.client import KubeCluster
from fluence_core.kube.errors import ApiError, Conflict
from fluence_core.settings import load_settings
from fluence_core.testing import make_pod_dict
from fluence_core.testing_apiserver import ApiServer, webhook_beside
from tests.e2e.accounts import account_cluster, bind_account

REPO = Path(__file__).resolve().parents[2]
POLICY_FILE = REPO / "deploy" / "admission-policy.yaml"
POLICIES = Resource("validatingadmissionpolicies", "ValidatingAdmissionPolicy",
                    group="admissionregistration.k8s.io", namespaced=False)
BINDINGS = Resource("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding",
                    group="admissionregistration.k8s.io", namespaced=False)
ALLOCATION = names.ALLOCATION_ANNOTATION


def _pod(name: str, *, scheduler: str = "default-scheduler",
         annotations: dict[str, str] | None = None,
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod no node can take (its node selector matches none): only admission acts."""
    return make_pod_dict(name, None, namespace=None, scheduler=scheduler,
                         annotations=annotations, labels=labels or {},
                         nodeSelector={"no-such-node": "x"})


@pytest.fixture
def policy(kube: KubeCluster, kube_namespace: str) -> Any:
    """The shipped policy and binding, the binding narrowed to this test's namespace, in
    force (a probe pod refused) before the test runs."""
    documents = [d for d in yaml.safe_load_all(POLICY_FILE.read_text()) if d]
    by_kind = {d["kind"]: d for d in documents}
    policy_body = copy.deepcopy(by_kind["ValidatingAdmissionPolicy"])
    binding = copy.deepcopy(by_kind["ValidatingAdmissionPolicyBinding"])
    suffix = kube_namespace
    policy_body["metadata"]["name"] += f"-{suffix}"
    binding["metadata"]["name"] += f"-{suffix}"
    binding["spec"]["policyName"] = policy_body["metadata"]["name"]
    binding["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {
        "kubernetes.io/metadata.name": kube_namespace}}}
    kube.create(POLICIES, policy_body)
    kube.create(BINDINGS, binding)
    deadline = time.monotonic() + 30
    while True:  # the API server loads policies from its own informer, a moment later
        try:
            kube.create("pods", _pod("probe", annotations={ALLOCATION: "{}"}), kube_namespace)
        except ApiError as refused:
            if "only Fluence writes" in str(refused):
                break
            raise
        kube.delete("pods", "probe", kube_namespace, grace_period_seconds=0)
        assert time.monotonic() < deadline, "the admission policy never took effect"
        time.sleep(0.5)
    yield
    kube.delete(BINDINGS, binding["metadata"]["name"])
    kube.delete(POLICIES, policy_body["metadata"]["name"])


@pytest.fixture
def tenant(apiserver: ApiServer, kube: KubeCluster, kube_namespace: str) -> KubeCluster:
    bind_account(kube, kube_namespace, "tenant", "edit", kube_namespace)
    return account_cluster(apiserver, kube_namespace, "tenant", kube_namespace)


@pytest.fixture
def fluence_webhook(apiserver: ApiServer, kube: KubeCluster, kube_namespace: str) -> KubeCluster:
    """Logged in as deploy/'s webhook ServiceAccount, fluence-system/fluence-webhook."""
    try:
        kube.create("namespaces", {"metadata": {"name": "fluence-system"}})
    except Conflict:
        pass
    bind_account(kube, "fluence-system", "fluence-webhook", "edit", kube_namespace)
    return account_cluster(apiserver, "fluence-system", "fluence-webhook", kube_namespace)


def test_a_tenants_pod_carrying_a_record_is_refused_at_create(
        policy: None, tenant: KubeCluster, kube_namespace: str) -> None:
    for key in (ALLOCATION, names.JOBIDS_ANNOTATION, names.BACKEND_ANNOTATION,
                names.ATTR_ANNOTATION_PREFIX + "region", names.SCOUT_STATUS_ANNOTATION):
        with pytest.raises(ApiError) as refused:
            tenant.create("pods", _pod("forger", annotations={key: "x"}), kube_namespace)
        assert f"only Fluence writes {key}" in str(refused.value)
    with pytest.raises(ApiError) as refused:
        tenant.create("podgroups", {
            "metadata": {"name": "forged", "annotations": {ALLOCATION: "{}"}},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}}}, kube_namespace)
    assert "only Fluence writes" in str(refused.value)


def test_a_fluence_pod_carrying_a_record_is_admitted_with_the_record_stripped(
        policy: None, tenant: KubeCluster, kube: KubeCluster, kube_namespace: str,
        tmp_path: Path) -> None:
    settings = load_settings(webhook_config=f"fluence-policy-{kube_namespace}")
    pod = _pod("fluence-pod", scheduler=names.SCHEDULER_NAME,
               annotations={ALLOCATION: '{"n1": [0, 1, 2, 3]}', names.BACKEND_ANNOTATION: "evil",
                            names.SCOUT_STATUS_ANNOTATION: "ready", "team": "a"})
    with webhook_beside(kube, settings, tmp_path / "tls", namespace=kube_namespace,
                        match_conditions=True):  # in force: the API server calls it
        stored = tenant.create("pods", pod, kube_namespace)
    notes = stored["metadata"].get("annotations") or {}
    assert notes == {"team": "a"}


def test_a_tenant_cannot_protect_its_pod_nor_change_a_scouts_role(
        policy: None, tenant: KubeCluster, kube_namespace: str) -> None:
    tenant.create("pods", _pod("mine", labels={names.ROLE_LABEL: names.ROLE_SCOUT}),
                  kube_namespace)
    edits = [
        {"metadata": {"annotations": {names.PROTECTED_ANNOTATION: "true"}}},
        {"metadata": {"annotations": {names.PROMISED_CORES_ANNOTATION: "64"}}},
        {"metadata": {"annotations": {names.SCOUT_STATUS_ANNOTATION: "ready"}}},
        {"metadata": {"labels": {names.ROLE_LABEL: None}}},
        {"metadata": {"labels": {names.ROLE_LABEL: names.ROLE_WORKER}}},
    ]
    for edit in edits:
        with pytest.raises(ApiError) as refused:
            tenant.patch("pods", "mine", edit, kube_namespace)
        assert "only Fluence sets or changes" in str(refused.value), edit
    tenant.patch("pods", "mine", {"metadata": {"annotations": {"team": "a"}}}, kube_namespace)


def test_fluences_own_service_account_writes_its_annotations(
        policy: None, tenant: KubeCluster, fluence_webhook: KubeCluster,
        kube_namespace: str) -> None:
    tenant.create("pods", _pod("scout", labels={names.ROLE_LABEL: names.ROLE_SCOUT}),
                  kube_namespace)
    fluence_webhook.patch("pods", "scout", {"metadata": {
        "annotations": {names.SCOUT_STATUS_ANNOTATION: "ready", ALLOCATION: "{}"},
        "labels": {names.ROLE_LABEL: None}}}, kube_namespace)
    with pytest.raises(ApiError):  # and the tenant may not undo it
        tenant.patch("pods", "scout", {"metadata": {"annotations": {ALLOCATION: None}}},
                     kube_namespace)
