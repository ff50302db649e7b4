"""Hostile AdmissionReviews: every one gets an answer naming what is wrong, and the webhook
still admits the next ordinary pod.

The service is the one ``fluence webhook`` serves (every installed handler and admission
control, from the plugins), over an in-memory cluster with two 4-core nodes.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import NODES
from fluence_core.kube.fake import FakeCluster
from fluence_core.plugins import get_plugin_manager
from fluence_core.settings import load_settings
from fluence_core.testing import make_node_dict, make_pod_dict
from fluence_core.webhook import build_service
from fluence_core.webhook.admission.review import AdmissionService
from tests.hostile.cases import Case, cases

pytestmark = pytest.mark.usefixtures("clean_env")

QPU = names.extended_resource("qpu")
SIZE = names.GROUP_SIZE_ANNOTATION


def pod(
    cpu: Any = "1",
    *,
    qpu: bool = False,
    annotations: dict[str, Any] | None = None,
    labels: dict[str, Any] | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """Pod ``p`` asking for ``cpu`` (and a QPU), then each of ``overrides`` set at its path
    (``spec__containers="app"``): the one malformed field a case is about."""
    body = make_pod_dict("p", cpu, extra={QPU: "1"} if qpu else None, annotations=annotations,
                         labels=labels or {})
    for path, value in overrides.items():
        target = body
        *parents, last = path.split("__")
        for part in parents:
            target = target[part]
        target[last] = value
    return body


def review(obj: Any = None, **request: Any) -> bytes:
    body = {
        "uid": "u-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE",
        "namespace": "default",
        "object": obj if obj is not None else pod(),
    }
    body.update(request)
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}
    ).encode()


def grouped(size: Any) -> dict[str, Any]:
    return pod(labels={names.GROUP_LABEL: "g"}, annotations={SIZE: size})


BAD_BODY = [  # answered 400, before any handler runs
    Case("empty", b"", "body is not JSON"),
    Case("not-json", b"{not json", "body is not JSON"),
    Case("not-utf8", b"\xff\xfe{}", "body is not JSON"),
    Case("json-array", b"[]", "body is not a JSON object"),
    Case("json-string", b'"review"', "body is not a JSON object"),
    Case("json-number", b"1e5000", "body is not JSON"),  # beyond a double: strict RFC 8259
    Case("json-deep", b"[" * 100_000 + b"]" * 100_000, "body is not JSON"),
    Case(
        "wrong-version",
        json.dumps(
            {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}
        ).encode(),
        "expected AdmissionReview admission.k8s.io/v1, got 'AdmissionReview'"
        " 'admission.k8s.io/v1beta1'",
    ),
    Case(
        "wrong-kind",
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "Pod"}).encode(),
        "expected AdmissionReview",
    ),
    Case(
        "no-request",
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
        "has no request",
    ),
    Case(
        "request-a-list",
        json.dumps(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []}
        ).encode(),
        "has no request",
    ),
    Case("no-uid", review(uid=None), "request has no uid"),
    Case("uid-empty", review(uid=""), "request has no uid"),
    Case("uid-a-number", review(uid=7), "request has no uid"),
    Case(
        "dry-run-string-false", review(dryRun="false"), "dryRun must be true or false, got 'false'"
    ),
    Case("dry-run-number", review(dryRun=0), "dryRun must be true or false, got 0"),
    Case("dry-run-list", review(dryRun=[True]), "dryRun must be true or false"),
]

DENIED = [  # answered 200 with allowed=false and a message naming the fault
    Case("cpu-1e5000-quantum", review(pod("1e5000", qpu=True)), "quantity '1e5000' is too large"),
    Case("cpu-1e18-quantum", review(pod("1e18", qpu=True)), "quantity '1e18' is too large"),
    Case(
        "cpu-1e10000000-quantum",
        review(pod("1e10000000", qpu=True)),
        "quantity '1e10000000' is too large",
    ),
    Case("cpu-negative-quantum", review(pod("-1", qpu=True)), "quantity '-1' is negative"),
    Case("cpu-text-quantum", review(pod("lots", qpu=True)), "not a Kubernetes quantity: 'lots'"),
    Case(
        "group-size-arabic",
        review(grouped("\u0663")),
        "group-size='\u0663' must be a positive integer",
    ),
    Case("group-size-underscore", review(grouped("4_000")), "group-size='4_000' must be"),
    Case("group-size-zero", review(grouped("0")), "group-size='0' must be"),
    Case("group-size-negative", review(grouped("-3")), "group-size='-3' must be"),
    Case("group-size-float", review(grouped("3.0")), "group-size='3.0' must be"),
    Case("group-size-exponent", review(grouped("1e3")), "group-size='1e3' must be"),
    Case("group-size-hex", review(grouped("0x10")), "group-size='0x10' must be"),
    Case("group-size-space", review(grouped(" 3")), "group-size=' 3' must be"),
    Case("group-size-empty", review(grouped("")), "group-size='' must be"),
    Case("group-size-past-limit", review(grouped("100001")), "at most 100000"),
    Case("group-size-huge", review(grouped("9" * 5000)), "group-size='9999.*must be"),
    Case(
        "group-name-upper",
        review(pod(labels={names.GROUP_LABEL: "Gang_A"})),
        "group 'Gang_A' must be a lower-case DNS name",
    ),
    Case(
        "group-name-dot-end",
        review(pod(labels={names.GROUP_LABEL: "gang."})),
        "group 'gang.' must be",
    ),
    Case(
        "group-name-too-long",
        review(pod(labels={names.GROUP_LABEL: "g" * 250})),
        "must be a lower-case DNS name of at most",
    ),
    Case(
        "coordination-unknown",
        review(
            pod(
                qpu=True,
                labels={names.GROUP_LABEL: "g"},
                annotations={names.COORDINATION_ANNOTATION: "chaos"},
            )
        ),
        "coordination='chaos'",
    ),
    Case("metadata-a-list", review(pod(metadata=["p"])), "pod metadata is not an object"),
    Case(
        "init-containers-a-mapping",
        review(pod(spec__initContainers={"name": "x"})),
        r"spec\.initContainers is not a list",
    ),
    Case(
        "limits-a-list",
        review(pod(spec__containers=[{"name": "a", "resources": {"limits": [1]}}])),
        r"spec\.containers\[0\]\.resources\.limits is not an object",
    ),
    Case("group-label-a-number", review(pod(labels={names.GROUP_LABEL: 7})), "group '7' must be"),
    Case(
        "spec-a-list",
        review({"kind": "Pod", "metadata": {"name": "p"}, "spec": []}),
        "the request carries no Pod object",
    ),
    Case("object-a-string", review("pod"), "the request carries no Pod object"),
    Case("object-missing", review(object=None), "the request carries no Pod object"),
    Case(
        "object-another-kind",
        review({"kind": "Secret", "spec": {}}),
        "the request carries no Pod object",
    ),
    Case("containers-a-string", review(pod(spec__containers="app")), "containers"),
    Case("container-a-string", review(pod(spec__containers=["app"])), "container"),
    Case(
        "resources-a-list",
        review(pod(qpu=True, spec__containers=[{"name": "app", "resources": [QPU]}])),
        "resources",
    ),
    Case(
        "requests-a-string",
        review(
            pod(
                qpu=True,
                spec__containers=[
                    {"name": "app", "resources": {"requests": "qpu", "limits": {QPU: "1"}}}
                ],
            )
        ),
        "requests",
    ),
    Case("labels-a-list", review(pod(metadata__labels=["a"])), "labels"),
    Case(
        "namespace-missing", review(namespace=None), "request.namespace 'None' is not a namespace"
    ),
    Case("namespace-empty", review(namespace=""), "request.namespace '' is not a namespace"),
    Case("namespace-path", review(namespace="../victim"), "request.namespace '../victim' is not"),
    Case("namespace-a-list", review(namespace=["a"]), r"request.namespace \"\['a'\]\" is not"),
    Case("annotations-a-string", review(pod(metadata__annotations="a")), "annotations"),
]


@pytest.fixture(scope="module")
def service() -> AdmissionService:
    cluster = FakeCluster()
    for name in ("n0", "n1"):
        cluster.create(NODES, make_node_dict(name, 4, "16Gi", pods=None))
    settings = load_settings(runtime_image="example.org/fluence:test")
    return build_service(settings, get_plugin_manager(settings), cluster)


def _still_serving(service: AdmissionService) -> None:
    outcome = service.review(review(pod("1")))
    assert outcome.status == 200 and outcome.response["allowed"] is True, outcome.body


@pytest.mark.parametrize("case", cases(BAD_BODY))
def test_a_body_that_is_no_admission_review_gets_a_400_naming_why(
    case: Case, service: AdmissionService
) -> None:
    outcome = service.review(case.input)
    assert outcome.status == 400
    assert outcome.response["allowed"] is False
    assert re.search(case.expect, outcome.response["status"]["message"]), outcome.body
    _still_serving(service)


@pytest.mark.parametrize("case", cases(DENIED))
def test_a_hostile_pod_is_refused_naming_the_fault(case: Case, service: AdmissionService) -> None:
    outcome = service.review(case.input)
    assert outcome.status in (200, 400), outcome.body
    assert outcome.response["allowed"] is False, outcome.body
    assert outcome.response["uid"] == "u-1"
    assert re.search(case.expect, outcome.response["status"]["message"]), outcome.body
    _still_serving(service)


def test_a_review_makes_nothing_in_the_requests_namespace_nor_the_objects(
    service: AdmissionService,
) -> None:
    """A pod claiming namespace "victim" in a review for "default" makes no PodGroup in
    either: a review proves nothing, only the stored pod does (issue 32)."""
    forged = pod(labels={names.GROUP_LABEL: "g"}, annotations={SIZE: "2"})
    forged["metadata"]["namespace"] = "victim"
    outcome = service.review(review(forged))
    assert outcome.response["allowed"] is True
    cluster = service.cluster
    assert cluster is not None
    assert cluster.get("podgroups", "g", "default") is None
    assert cluster.get("podgroups", "g", "victim") is None
