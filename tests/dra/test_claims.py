"""Claims read as the allocator needs them; what is out of scope is refused with a reason."""

from __future__ import annotations

import pytest

from fluence_core.dra.claims import OutOfScope, owned_by, pod_claims, read_claim
from fluence_core.testing import (
    claim_entries, make_device_request, make_pod_dict, make_resource_claim_dict,
)


def test_an_exact_request_reads_its_class_selectors_and_count() -> None:
    claim = read_claim(make_resource_claim_dict("c", [
        make_device_request("gpus", "gpu", 2, "device.driver == 'x'")]))
    (request,) = claim.requests
    (choice,) = request.choices
    assert (choice.name, choice.device_class, choice.count, choice.selectors) == (
        "gpus", "gpu", 2, ("device.driver == 'x'",))


def test_first_available_sub_requests_are_named_request_slash_sub() -> None:
    claim = read_claim(make_resource_claim_dict("c", [{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "a100"}, {"name": "small", "deviceClassName": "t4"}]}]))
    assert [c.name for c in claim.requests[0].choices] == ["gpu/big", "gpu/small"]
    assert {c.request for c in claim.requests[0].choices} == {"gpu"}


def test_a_match_attribute_constraint_is_qualified() -> None:
    claim = read_claim(make_resource_claim_dict(
        "c", [make_device_request("a", "gpu")],
        constraints=[{"matchAttribute": "numa.example.com/zone", "requests": ["a"]}]))
    (constraint,) = claim.constraints
    assert constraint.attribute == ("numa.example.com", "zone") and constraint.covers("a")


@pytest.mark.parametrize("field, value, words", [
    ("adminAccess", True, "adminAccess"),
    ("capacity", {"requests": {"memory": "1Gi"}}, "consumable capacity"),
    ("tolerations", [{"key": "x", "operator": "Exists"}], "device taints"),
])
def test_what_fluence_does_not_allocate_is_out_of_scope(field: str, value: object,
                                                         words: str) -> None:
    body = make_resource_claim_dict("c", [make_device_request("r", "gpu", **{field: value})])
    with pytest.raises(OutOfScope, match=words):
        read_claim(body)


def test_distinct_attribute_is_out_of_scope() -> None:
    body = make_resource_claim_dict("c", [make_device_request("r", "gpu")],
                                    constraints=[{"distinctAttribute": "x.example.com/y"}])
    with pytest.raises(OutOfScope, match="distinctAttribute"):
        read_claim(body)


def test_a_pod_names_its_claim_directly() -> None:
    (entry,) = pod_claims(make_pod_dict("p", resourceClaims=claim_entries(gpu="mine")))
    assert (entry.name, entry.claim, entry.template) == ("gpu", "mine", False)


def test_a_template_claim_is_unknown_until_the_pod_status_names_it() -> None:
    pod = make_pod_dict("p", resourceClaims=claim_entries(gpu="template:t"))
    assert pod_claims(pod)[0].claim is None
    pod["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]}
    assert pod_claims(pod)[0].claim == "p-gpu-x"


def test_a_template_claim_must_be_controlled_by_its_pod() -> None:
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "controller": True}
    claim = read_claim(make_resource_claim_dict("c", [make_device_request("r", "gpu")],
                                                owners=[owner]))
    assert owned_by(claim, "u1") and not owned_by(claim, "u2")
