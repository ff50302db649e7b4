"""The e2e harness's webhook registration (no API server needed)."""

from __future__ import annotations

import base64

import pytest

from fluence_core.testing_apiserver import webhook_entry


def test_a_pods_entry_sends_creates_in_one_namespace_to_the_url_and_fails_closed() -> None:
    entry = webhook_entry("pods", "https://127.0.0.1:1/mutate", "ns1", reinvocation="Never")
    assert entry["name"] == "pods.fluence.flux-framework.org"
    assert entry["clientConfig"] == {"url": "https://127.0.0.1:1/mutate"}
    assert entry["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"],
                               "operations": ["CREATE"], "resources": ["pods"]}]
    assert entry["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "ns1"}}
    assert (entry["failurePolicy"], entry["sideEffects"], entry["reinvocationPolicy"]) == (
        "Fail", "None", "Never")
    assert "matchConditions" not in entry


def test_a_jobs_entry_names_the_batch_group_and_carries_the_ca_and_conditions() -> None:
    condition = {"name": "c", "expression": "true"}
    entry = webhook_entry("jobs", "https://x/mutate", "ns1", ca_pem=b"PEM",
                          match_conditions=[condition])
    assert entry["rules"][0]["apiGroups"] == ["batch"]
    assert base64.b64decode(entry["clientConfig"]["caBundle"]) == b"PEM"
    assert entry["matchConditions"] == [condition]


def test_an_unknown_resource_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="'deployments'"):
        webhook_entry("deployments", "https://x/mutate", "ns1")
