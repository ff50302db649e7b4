"""Hostile DRA objects: one claim, pod, slice or class never stops the scheduler.

Each case adds one hostile object to a cluster of one node whose driver publishes
four GPUs, where ordinary pods with good claims keep arriving. Those pods are
placed and their claims allocated before and after a restart (which re-lists the
hostile object); what is wrong is named, in the pod's FailedScheduling event when
a pod of ours is the one that cannot go, in the log otherwise; and at the end no
device is allocated to two claims, whatever the hostile object claimed.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from fluence_core.kube.api import DEVICE_CLASSES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES
from fluence_core.kube.fake import FakeCluster
from tests.hostile.cases import Case, cases
from tests.scheduler.conftest import Harness, node, pod
from fluence_core.testing import (
    claim_entries, make_device, make_device_class_dict, make_device_request,
    make_resource_claim_dict, make_resource_slice_dict,
)

pytestmark = pytest.mark.usefixtures("clean_env")

DRIVER = "gpu.example.com"
GPUS = 4


def _cluster() -> Harness:
    """One node, n0, with four GPUs of class ``gpu`` (any device of the driver)."""
    h = Harness(FakeCluster())
    h.add(node("n0", cpu=8))
    h.cluster.create(DEVICE_CLASSES, make_device_class_dict("gpu", f'device.driver == "{DRIVER}"'))
    h.cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
        "n0-gpus", DRIVER, [make_device(f"gpu{i}", {"model": "t4"}) for i in range(GPUS)],
        node="n0"))
    return h


def _claim(name: str, *requests: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """Claim ``name`` with ``requests`` (one good GPU when none), ``spec`` over its devices."""
    body = make_resource_claim_dict(name, list(requests) or [make_device_request("r", "gpu")])
    body["spec"]["devices"].update(spec)
    return body


def _exactly(**exactly: Any) -> dict[str, Any]:
    """A claim whose one request's ``exactly`` is the good one with ``exactly`` set over it."""
    return _claim("bad", make_device_request("r", "gpu", **exactly))


def _selecting(expression: str) -> dict[str, Any]:
    return _claim("bad", make_device_request("r", "gpu", 1, expression))


def _allocated(allocation: Any, **status: Any) -> Callable[[Harness], None]:
    """Claim ``bad`` with ``status.allocation`` as given (what a buggy writer left there)."""
    def make(h: Harness) -> None:
        h.cluster.create(RESOURCE_CLAIMS, _claim("bad"))
        h.cluster.patch_status(RESOURCE_CLAIMS, "bad", {"status": {
            "allocation": allocation, **status}}, "default")
    return make


def _status_garbled(h: Harness) -> None:
    """Claim ``bad`` whose whole status is a string."""
    h.cluster.create(RESOURCE_CLAIMS, _claim("bad"))
    h.cluster.patch_status(RESOURCE_CLAIMS, "bad", {"status": "allocated"}, "default")


def _result(device: str, pool: str = "n0") -> dict[str, str]:
    return {"request": "r", "driver": DRIVER, "pool": pool, "device": device}


ON_N0 = {"nodeSelectorTerms": [{"matchFields": [
    {"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]}

DEEP = "(" * 2000 + "true" + ")" * 2000
LONG = " && ".join(["device.driver != ''"] * 20_000)

CLAIMS = [  # a claim our pod h uses: h waits with the reason, the claim named
    Case("requests-a-string", _claim("bad", requests="gpu"),
         r"ResourceClaim default/bad: spec\.devices\.requests is not a list"),
    Case("request-a-number", _claim("bad", requests=[7]),
         r"ResourceClaim default/bad: spec\.devices\.requests\[0\] is not an object"),
    Case("request-neither", _claim("bad", {"name": "r"}),
         r"requests\[0\] \(r\): neither exactly nor firstAvailable"),
    Case("count-0", _exactly(count=0), r"requests\[0\] \(r\): count must be at least 1"),
    Case("count-negative", _exactly(count=-3), r"requests\[0\] \(r\): count must be at least 1"),
    Case("count-1e18", _exactly(count=10**18),
         r"request 'r' wants 1000000000000000000 device\(s\) of class 'gpu'"),
    Case("count-a-float", _exactly(count=1e18), r"count 1e\+18 is not an integer"),
    Case("count-a-string", _exactly(count="two"), r"count 'two' is not an integer"),
    Case("mode-unknown", _exactly(allocationMode="Some"),
         r"allocationMode 'Some' is neither ExactCount nor All"),
    Case("first-available-empty", _claim("bad", {"name": "r", "firstAvailable": []}),
         r"requests\[0\] \(r\): firstAvailable is empty"),
    Case("first-available-a-string", _claim("bad", {"name": "r", "firstAvailable": "gpu"}),
         r"requests\[0\] \(r\)\.firstAvailable is not a list"),
    Case("exactly-a-string", _claim("bad", {"name": "r", "exactly": "gpu"}),
         r"requests\[0\] \(r\)\.exactly is not an object"),
    Case("selectors-a-string", _exactly(selectors="device.driver"),
         r"requests\[0\] \(r\)\.selectors is not a list"),
    Case("cel-does-not-compile", _selecting("device.driver =="),
         r"ResourceClaim default/bad: CEL selector 'device\.driver ==' does not compile"),
    Case("cel-missing-attribute", _selecting(f'device.attributes["{DRIVER}"].memory > 1'),
         r"ResourceClaim default/bad: CEL selector .*memory > 1' on device "
         rf"{DRIVER}/n0/gpu0: .*memory"),
    Case("cel-wrong-type", _selecting(f'device.attributes["{DRIVER}"].model > 1'),
         r"ResourceClaim default/bad: CEL selector .*model > 1' on device"),
    Case("cel-not-a-bool", _selecting("1 + 1"),
         r"ResourceClaim default/bad: CEL selector '1 \+ 1' on device .* yields int, not a bool"),
    Case("cel-deeply-nested", _selecting(DEEP),
         r"ResourceClaim default/bad: CEL selector '\(\(\(.*\(4004 characters\) does not compile: "
         r".*recursion limit"),
    Case("cel-very-long", _selecting(LONG),
         r"ResourceClaim default/bad: CEL selector \"device\.driver != '' && .*\.\.\. "
         r"\(459996 characters\) does not compile"),
    Case("match-attribute-nobody-has",
         _claim("bad", make_device_request("r", "gpu", 2),
                constraints=[{"matchAttribute": f"{DRIVER}/numa"}]),
         rf"ResourceClaim default/bad: matchAttribute {DRIVER}/numa: no matching device has "
         r"this attribute"),
    Case("constraints-a-string", _claim("bad", constraints="same-numa"),
         r"ResourceClaim default/bad: spec\.devices\.constraints is not a list"),
    Case("constraint-a-number", _claim("bad", constraints=[3]),
         r"spec\.devices\.constraints\[0\] is not an object"),
    Case("class-missing", _exactly(deviceClassName="fpga"),
         r"ResourceClaim default/bad: DeviceClass 'fpga' does not exist"),
    Case("class-a-number", _exactly(deviceClassName=7),
         r"requests\[0\] \(r\): deviceClassName is required"),
    Case("devices-a-list", {**_claim("bad"), "spec": {"devices": ["gpu"]}},
         r"ResourceClaim default/bad: spec\.devices is not an object"),
    Case("allocation-a-string", _allocated("everything"),
         r"ResourceClaim default/bad: status\.allocation is not an object"),
    Case("allocation-results-a-string", _allocated({"devices": {"results": "gpu0"}}),
         r"ResourceClaim default/bad: status\.allocation\.devices\.results is not a list"),
    Case("allocation-result-a-number", _allocated({"devices": {"results": [5]}}),
         r"status\.allocation\.devices\.results\[0\] is not an object"),
    Case("allocation-node-selector-garbled",
         _allocated({"devices": {"results": [_result("gpu0")]}, "nodeSelector": "n0"}),
         r"ResourceClaim default/bad: status\.allocation\.nodeSelector is not an object"),
    Case("allocation-node-selector-unreadable", _allocated({
        "devices": {"results": [_result("gpu0")]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a"}]}]}}),
         r"ResourceClaim bad is allocated to devices out of reach"),
    Case("allocation-unknown-device", _allocated({
        "devices": {"results": [_result("gpu9", pool="elsewhere")]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n9"]}]}]}}),
         r"ResourceClaim bad is allocated to devices out of reach"),
    Case("status-a-string", _status_garbled,
         r"ResourceClaim default/bad: status is not an object"),
    Case("reserved-for-a-string", _allocated(
        {"devices": {"results": [_result("gpu0")]}, "nodeSelector": ON_N0}, reservedFor="p"),
         r"ResourceClaim default/bad: status\.reservedFor is not a list"),
    Case("reserved-for-strings", _allocated(
        {"devices": {"results": [_result("gpu0")]}, "nodeSelector": ON_N0},
        reservedFor=["p"] * 3),
         r"ResourceClaim default/bad: status\.reservedFor\[0\] is not an object"),
    Case("reserved-for-huge", _allocated(
        {"devices": {"results": [_result("gpu0")]}, "nodeSelector": ON_N0},
        reservedFor=[{"resource": "pods", "name": f"p{i}", "uid": f"u{i}"}
                     for i in range(10_000)]),
         r"ResourceClaim bad is reserved for too many pods"),
]

PODS_ = [  # our pod h, its spec.resourceClaims or status garbled
    Case("claims-a-string", {"spec": {"resourceClaims": "gpu"}},
         r"pod default/h: spec\.resourceClaims is not a list"),
    Case("claims-a-mapping", {"spec": {"resourceClaims": {"gpu": "good"}}},
         r"pod default/h: spec\.resourceClaims is not a list"),
    Case("claim-entry-a-number", {"spec": {"resourceClaims": [7]}},
         r"pod default/h: spec\.resourceClaims\[0\] is not an object"),
    Case("claim-entry-nameless", {"spec": {"resourceClaims": [{"resourceClaimName": "x"}]}},
         r"pod default/h: spec\.resourceClaims\[0\] has no name"),
    Case("claim-entries-same-name", {"spec": {"resourceClaims": [
        {"name": "gpu", "resourceClaimName": "x"}, {"name": "gpu", "resourceClaimName": "y"}]}},
         r"pod default/h: spec\.resourceClaims\[1\] \(gpu\): the name is used twice"),
    Case("claim-entry-both", {"spec": {"resourceClaims": [
        {"name": "gpu", "resourceClaimName": "x", "resourceClaimTemplateName": "t"}]}},
         r"spec\.resourceClaims\[0\] \(gpu\): names both a claim and a template"),
    Case("claim-entry-neither", {"spec": {"resourceClaims": [{"name": "gpu"}]}},
         r"spec\.resourceClaims\[0\] \(gpu\): names neither a claim nor a template"),
    Case("claim-name-a-number", {"spec": {"resourceClaims": [
        {"name": "gpu", "resourceClaimName": 7}]}},
         r"spec\.resourceClaims\[0\] \(gpu\): resourceClaimName is not a string"),
    Case("statuses-a-number", {"status": {"resourceClaimStatuses": 7}},
         r"pod default/h: status\.resourceClaimStatuses is not a list"),
    Case("statuses-a-mapping", {"status": {"resourceClaimStatuses": {"gpu": "x"}}},
         r"pod default/h: status\.resourceClaimStatuses is not a list"),
    Case("status-claim-name-a-number", {"status": {"resourceClaimStatuses": [
        {"name": "gpu", "resourceClaimName": 7}]}},
         r"status\.resourceClaimStatuses\[0\] \(gpu\): resourceClaimName is not a string"),
]


def _slice(name: str, devices: Any, **spec: Any) -> dict[str, Any]:
    """Slice ``name`` of the driver, in its own pool on n0; ``spec`` set over its spec."""
    body = make_resource_slice_dict(name, DRIVER, [], node="n0", pool=name)
    body["spec"]["devices"] = devices
    body["spec"].update(spec)
    return body


def _device(**more: Any) -> dict[str, Any]:
    """Device x0, a t4, with ``more`` set over it as given."""
    return {**make_device("x0", {"model": "t4"}), **more}


SLICES = [  # logged by name, left out; the good slice's devices still allocated
    Case("slice-devices-a-string", _slice("bad", "gpu"),
         r"ResourceSlice bad is left out: spec\.devices is not a list"),
    Case("slice-device-a-number", _slice("bad", [7]),
         r"ResourceSlice bad is left out: spec\.devices\[0\]: a device needs a name"),
    Case("slice-device-nameless", _slice("bad", [{"attributes": {}}]),
         r"ResourceSlice bad is left out: spec\.devices\[0\]: a device needs a name"),
    Case("slice-attributes-a-list", _slice("bad", [_device(attributes=["model"])]),
         r"ResourceSlice bad is left out: spec\.devices\[0\]\.attributes is not an object"),
    Case("slice-attribute-two-kinds", _slice("bad", [_device(
        attributes={"model": {"int": 1, "string": "t4"}})]),
         r"ResourceSlice bad is left out: spec\.devices\[0\]\.attributes\[model\]: "
         r"expected exactly one of"),
    Case("slice-version-not-semver", _slice("bad", [_device(
        attributes={"driverVersion": {"version": "banana"}})]),
         r"ResourceSlice bad is left out: .*attributes\[driverVersion\]: "
         r"'banana' is not a semantic version"),
    Case("slice-int-past-int64", _slice("bad", [_device(
        attributes={"memory": {"int": 2**70}})]),
         r"ResourceSlice bad is left out: .*attributes\[memory\]: int=1180591620717411303424 "
         r"is out of int64"),
    Case("slice-int-int64-max", _slice("bad", [_device(attributes={"memory": {"int": 2**63}})]),
         r"attributes\[memory\]: int=9223372036854775808 is out of int64"),
    Case("slice-capacity-text", _slice("bad", [_device(capacity={"memory": {"value": "lots"}})]),
         r"ResourceSlice bad is left out: .*capacity\[memory\]: not a Kubernetes quantity"),
    Case("slice-capacity-a-string", _slice("bad", [_device(capacity={"memory": "16Gi"})]),
         r"ResourceSlice bad is left out: .*capacity\[memory\]: .*"),
    Case("slice-capacity-a-list", _slice("bad", [_device(capacity=["memory"])]),
         r"ResourceSlice bad is left out: spec\.devices\[0\]\.capacity is not an object"),
    Case("slice-count-0", _slice("bad", [_device()], pool={
        "name": "bad", "generation": 1, "resourceSliceCount": 0}),
         r"ResourceSlice bad is left out: its pool cannot be read "
         r"\(spec\.pool\.resourceSliceCount 0 is not a positive integer\)"),
    Case("slice-count-a-string", _slice("bad", [_device()], pool={
        "name": "bad", "generation": 1, "resourceSliceCount": "two"}),
         r"ResourceSlice bad is left out: its pool cannot be read .*resourceSliceCount 'two'"),
    Case("slice-generation-a-string", _slice("bad", [_device()], pool={
        "name": "bad", "generation": "new", "resourceSliceCount": 1}),
         r"ResourceSlice bad is left out: its pool cannot be read .*generation 'new'"),
    Case("slice-pool-a-string", _slice("bad", [_device()], pool="bad"),
         r"ResourceSlice bad is left out: its pool cannot be read"),
    Case("slice-node-and-all-nodes", _slice("bad", [_device()], allNodes=True),
         r"ResourceSlice bad is left out: .*nodeName, nodeSelector and allNodes"),
    Case("slice-node-selector-garbled", {**_slice("bad", [_device()], nodeSelector="n0"),
                                         },
         r"ResourceSlice bad is left out: .*nodeSelector"),
    Case("slice-spec-a-list", {**_slice("bad", []), "spec": ["gpu"]},
         r"ResourceSlice bad is left out: "),
]

CLASSES = [  # logged by name; pods of the class wait with the reason
    Case("class-selectors-a-string", make_device_class_dict("bad") | {
        "spec": {"selectors": "device.driver"}},
         r"DeviceClass bad is left out: spec\.selectors is not a list"),
    Case("class-selectors-a-number", make_device_class_dict("bad") | {
        "spec": {"selectors": 7}},
         r"DeviceClass bad is left out: spec\.selectors is not a list"),
    Case("class-selector-without-cel", make_device_class_dict("bad") | {
        "spec": {"selectors": [{"expression": "true"}]}},
         r"DeviceClass bad is left out: spec\.selectors\[0\]: only CEL selectors exist"),
    Case("class-spec-a-string", make_device_class_dict("bad") | {"spec": "gpu"},
         r"DeviceClass bad is left out: spec is not an object"),
]


def _make_pod(h: Harness, name: str, claim: str) -> None:
    h.add(pod(name, resourceClaims=claim_entries(gpu=claim)))


def _allocations(h: Harness) -> dict[str, list[str]]:
    """Every claim's allocated devices (as pool/device), by claim name."""
    found = {}
    for claim in h.cluster.list(RESOURCE_CLAIMS).items:
        status = claim.get("status")
        allocation = status.get("allocation") if isinstance(status, dict) else None
        results = ((allocation or {}).get("devices") or {}).get("results") \
            if isinstance(allocation, dict) else None
        if isinstance(results, list):
            found[claim["metadata"]["name"]] = [
                f"{r.get('pool')}/{r.get('device')}" for r in results if isinstance(r, dict)]
    return found


def _good_claims_keep_being_allocated(h: Harness, hostile_holders: int = 1) -> None:
    """Two pods with good claims are placed and allocated, one before and one after a
    restart; the claims Fluence allocated share no device with any other claim."""
    for step in range(2):
        h.cluster.create(RESOURCE_CLAIMS, _claim(f"good{step}"))
        _make_pod(h, f"ok{step}", f"good{step}")
        h.cycle()
        assert h.node_of(f"ok{step}") == "n0", f"ordinary pod {step} was placed"
        assert len(_allocations(h).get(f"good{step}", [])) == 1, _allocations(h)
        if step == 0:
            h.restart()  # re-lists the hostile object: no crash loop
    _no_device_twice(h)


def _no_device_twice(h: Harness) -> None:
    ours = {name: devices for name, devices in _allocations(h).items()
            if not name.startswith("bad")}
    counts = Counter(d for devices in ours.values() for d in devices)
    theirs = {d for name, devices in _allocations(h).items() if name.startswith("bad")
              for d in devices}
    twice = {d for d, n in counts.items() if n > 1} | (set(counts) & theirs)
    assert not twice, f"allocated twice: {sorted(twice)} in {_allocations(h)}"


def _reason_of(h: Harness, name: str) -> list[str]:
    return [e.get("message", "") for e in h.cluster.events(reason="FailedScheduling",
                                                            involved_name=name)]


def _waits_with(h: Harness, expect: str) -> None:
    messages = _reason_of(h, "h")
    assert any(re.search(expect, m) for m in messages), messages
    assert h.node_of("h") is None


@pytest.mark.parametrize("case", cases(CLAIMS))
def test_a_pod_with_a_hostile_claim_waits_with_a_reason_and_good_claims_are_allocated(
        case: Case) -> None:
    h = _cluster()
    if callable(case.input):
        case.input(h)
    else:
        h.cluster.create(RESOURCE_CLAIMS, case.input)
    _make_pod(h, "h", "bad")
    started = time.monotonic()
    h.cycle()
    assert time.monotonic() - started < 10, "one cycle took more than 10 s"
    _waits_with(h, case.expect)
    _good_claims_keep_being_allocated(h)
    h.cycle()
    _waits_with(h, case.expect)  # and again after the restart, named the same way


@pytest.mark.parametrize("case", cases(PODS_))
def test_a_hostile_pod_with_claims_waits_with_a_reason_and_good_claims_are_allocated(
        case: Case) -> None:
    h = _cluster()
    h.cluster.create(RESOURCE_CLAIMS, _claim("x"))
    h.cluster.create(RESOURCE_CLAIMS, _claim("y"))
    entries = claim_entries(gpu="template:t" if "status" in case.input else "x")
    body = pod("h", resourceClaims=entries)
    body["spec"].update(case.input.get("spec", {}))
    h.add(body)
    if "status" in case.input:  # what the resourceclaim controller would have written
        h.cluster.patch_status(PODS, "h", {"status": case.input["status"]}, "default")
    h.cycle()
    _waits_with(h, case.expect)
    _good_claims_keep_being_allocated(h)


@pytest.mark.parametrize("case", cases(SLICES))
def test_a_hostile_slice_is_logged_by_name_and_the_good_devices_are_allocated(
        case: Case, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="fluence"):
        h = _cluster()
        h.cluster.create(RESOURCE_SLICES, case.input)
        h.cycle()
        _good_claims_keep_being_allocated(h)
    messages = [r.getMessage() for r in caplog.records]
    assert any(re.search(case.expect, m) for m in messages), messages
    assert all(d.id.pool == "n0" for d in h.scheduler.view.dra.inventory.devices())


@pytest.mark.parametrize("case", cases(CLASSES))
def test_a_hostile_class_is_logged_by_name_and_its_pods_wait_with_the_reason(
        case: Case, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="fluence"):
        h = _cluster()
        h.cluster.create(DEVICE_CLASSES, case.input)
        h.cluster.create(RESOURCE_CLAIMS, _claim("bad", make_device_request("r", "bad")))
        _make_pod(h, "h", "bad")
        h.cycle()
        _good_claims_keep_being_allocated(h)
    messages = [r.getMessage() for r in caplog.records]
    assert any(re.search(case.expect, m) for m in messages), messages
    _waits_with(h, r"ResourceClaim default/bad: DeviceClass 'bad' cannot be used: "
                + case.expect.split("left out: ", 1)[1])


def test_a_class_whose_selector_does_not_compile_keeps_its_pods_waiting_with_the_reason(
        ) -> None:
    h = _cluster()
    h.cluster.create(DEVICE_CLASSES, make_device_class_dict("bad", "device.driver =="))
    h.cluster.create(RESOURCE_CLAIMS, _claim("bad", make_device_request("r", "bad")))
    _make_pod(h, "h", "bad")
    h.cycle()
    _waits_with(h, r"ResourceClaim default/bad: CEL selector 'device\.driver ==' does not "
                r"compile")
    _good_claims_keep_being_allocated(h)


def test_a_slice_whose_generation_goes_back_is_not_offered() -> None:
    """A pool's newest generation is the one that counts: a slice rewritten at an older
    one leaves its pool incomplete, and the devices it names are never allocated."""
    h = _cluster()
    h.cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
        "spare", DRIVER, [make_device("s0")], node="n0", pool="spare", generation=5,
        slice_count=1))
    h.cluster.patch(RESOURCE_SLICES, "spare", {"spec": {"pool": {"generation": 3}}})
    h.cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
        "spare-b", DRIVER, [make_device("s1")], node="n0", pool="spare", generation=2,
        slice_count=1))
    h.cycle()
    offered = {d.id.device for d in h.scheduler.view.dra.inventory.devices()}
    assert offered == {f"gpu{i}" for i in range(GPUS)} | {"s0"}
    _good_claims_keep_being_allocated(h)


def test_a_slice_naming_no_node_offers_nothing_and_breaks_nothing() -> None:
    h = _cluster()
    h.cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
        "ghost", DRIVER, [make_device(f"g{i}") for i in range(GPUS)], node="nowhere"))
    for i in range(GPUS + 1):
        h.cluster.create(RESOURCE_CLAIMS, _claim(f"c{i}"))
        _make_pod(h, f"p{i}", f"c{i}")
    h.cycle()
    placed = [i for i in range(GPUS + 1) if h.node_of(f"p{i}") == "n0"]
    assert len(placed) == GPUS
    assert all(d.startswith("n0/") for ds in _allocations(h).values() for d in ds)
    _no_device_twice(h)


def test_ten_thousand_devices_in_one_slice_are_allocated_in_a_unit_test_time() -> None:
    h = _cluster()
    h.cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
        "big", DRIVER, [make_device(f"d{i}", {"model": "big", "index": i})
                        for i in range(10_000)], node="n0", pool="big"))
    h.cluster.create(RESOURCE_CLAIMS, _claim("many", make_device_request(
        "r", "gpu", 8, f'device.attributes["{DRIVER}"].model == "big"')))
    _make_pod(h, "p", "many")
    started = time.monotonic()
    h.cycle()
    assert time.monotonic() - started < 20
    assert h.node_of("p") == "n0"
    assert len(_allocations(h)["many"]) == 8
    _good_claims_keep_being_allocated(h)


@dataclass(frozen=True)
class _Holders:
    """Two claims (not Fluence's) whose allocations both name n0's gpu0."""

    first: str = "bad-one"
    second: str = "bad-two"

    def make(self, h: Harness) -> None:
        for name in (self.first, self.second):
            h.cluster.create(RESOURCE_CLAIMS, _claim(name))

    def allocate(self, h: Harness, name: str, device: str | None) -> None:
        allocation = None if device is None else {
            "devices": {"results": [_result(device)]}, "nodeSelector": ON_N0}
        h.cluster.patch_status(RESOURCE_CLAIMS, name, {"status": {"allocation": allocation}},
                               "default")


@pytest.mark.parametrize("released", ["first", "second"])
def test_a_device_two_claims_hold_stays_taken_until_both_let_it_go(released: str) -> None:
    """However the double allocation came about, the device is not free while one of them
    still names it: a new claim never gets it."""
    h = Harness(FakeCluster())
    h.add(node("n0", cpu=8))
    h.cluster.create(DEVICE_CLASSES, make_device_class_dict("gpu", f'device.driver == "{DRIVER}"'))
    h.cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
        "n0-gpus", DRIVER, [make_device("gpu0")], node="n0"))
    holders = _Holders()
    holders.make(h)
    h.cycle()  # the taken set is built, then kept up to date claim by claim
    holders.allocate(h, holders.first, "gpu0")
    holders.allocate(h, holders.second, "gpu0")
    h.cycle()
    holders.allocate(h, getattr(holders, released), None)
    h.cluster.create(RESOURCE_CLAIMS, _claim("mine"))
    _make_pod(h, "p", "mine")
    h.cycle()
    assert h.node_of("p") is None
    assert "mine" not in _allocations(h)
    h.restart()
    h.cycle()
    assert h.node_of("p") is None
    assert "mine" not in _allocations(h)
