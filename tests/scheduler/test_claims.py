"""Pods with ResourceClaims: devices allocated in the match, written before the bind."""

from __future__ import annotations

from typing import Any, Callable

from fluence_core import names
from fluence_core.kube.api import (
    DEVICE_CLASSES, PODS, RESOURCE_CLAIMS, RESOURCE_SLICES, ClusterAPI,
)
from fluence_core.kube.errors import ApiError
from fluence_core.kube.fake import FakeCluster
from fluence_core.scheduler.core import Scheduler
from fluence_core.settings import load_settings
from fluence_core.testing import (
    claim_entries, make_device, make_device_class_dict, make_device_request,
    make_resource_claim_dict, make_resource_slice_dict,
)
from tests.scheduler.conftest import Harness, node, pod, pod_group

Factory = Callable[..., Harness]
DRIVER = "gpu.example.com"
A100 = f'device.attributes["{DRIVER}"].model == "a100"'


def _devices(h: Harness, node_name: str, count: int = 2, model: str = "t4") -> None:
    h.cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
        f"{node_name}-gpus", DRIVER,
        [make_device(f"gpu{i}", {"model": model}) for i in range(count)], node=node_name))


def _setup(harness_factory: Factory, *nodes: str) -> Harness:
    h = harness_factory(*(node(n, 8) for n in nodes))
    h.cluster.create(DEVICE_CLASSES, make_device_class_dict(
        "gpu", f'device.driver == "{DRIVER}"'))
    return h


def _claim(h: Harness, name: str, count: int = 1, *selectors: str, **more: Any) -> None:
    h.cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict(
        name, [make_device_request("r", "gpu", count, *selectors, **more)]))


def _with_claim(name: str, claim: str, **more: Any) -> dict[str, Any]:
    return pod(name, resourceClaims=claim_entries(gpu=claim), **more)


def _status(h: Harness, claim: str) -> dict[str, Any]:
    found = h.cluster.get(RESOURCE_CLAIMS, claim, "default")
    assert found is not None
    return dict(found.get("status") or {})


def _devices_of(h: Harness, claim: str) -> list[str]:
    allocation = _status(h, claim).get("allocation") or {}
    return [f"{r['pool']}/{r['device']}" for r in allocation.get("devices", {}).get("results", [])]


def _reason(h: Harness, name: str) -> str:
    found = h.cluster.get(PODS, name, "default")
    assert found is not None
    conditions = (found.get("status") or {}).get("conditions") or []
    return str(next(c["message"] for c in conditions if c["type"] == "PodScheduled"))


def test_a_pod_goes_to_the_node_of_its_only_matching_device(harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a", "b")
    _devices(h, "a")
    _devices(h, "b", model="a100")
    _claim(h, "c", 1, A100)
    h.add(_with_claim("p", "c"))
    h.cycle()
    assert h.node_of("p") == "b"
    assert _devices_of(h, "c") == ["b/gpu0"]


def test_the_claim_is_reserved_for_the_pod_with_the_finalizer(harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a")
    _claim(h, "c")
    h.add(_with_claim("p", "c"))
    h.cycle()
    claim = h.cluster.get(RESOURCE_CLAIMS, "c", "default")
    assert claim is not None
    pod_obj = h.cluster.get(PODS, "p", "default")
    assert pod_obj is not None
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "p", "uid": pod_obj["metadata"]["uid"]}]
    assert claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0][
        "matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["a"]}]
    assert names.CLAIM_PROTECTION_FINALIZER in claim["metadata"]["finalizers"]


def test_a_gang_spreads_over_the_nodes_its_devices_need(harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a", "b", "c")
    for n in "abc":
        _devices(h, n)
    h.add(pod_group("g", 3))
    for i in range(3):
        _claim(h, f"c{i}", 2)
        h.add(_with_claim(f"m{i}", f"c{i}", group="g"))
    h.cycle()
    assert sorted(h.node_of(f"m{i}") or "" for i in range(3)) == ["a", "b", "c"]
    taken = [d for i in range(3) for d in _devices_of(h, f"c{i}")]
    assert len(taken) == 6 == len(set(taken))


def test_a_gang_without_devices_for_every_member_binds_none(harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a", "b")
    for n in "ab":
        _devices(h, n)
    h.add(pod_group("g", 3))
    for i in range(3):
        _claim(h, f"c{i}", 2)
        h.add(_with_claim(f"m{i}", f"c{i}", group="g"))
    h.cycle()
    assert [h.node_of(f"m{i}") for i in range(3)] == [None, None, None]
    assert all(not _status(h, f"c{i}") for i in range(3))
    assert "can allocate its claims" in _reason(h, "m2")


def test_devices_allocated_before_a_restart_stay_taken(harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a", count=1)
    _claim(h, "first")
    h.add(_with_claim("p1", "first"))
    h.cycle()
    h.restart()
    _claim(h, "second")
    h.add(_with_claim("p2", "second"))
    h.cycle()
    assert h.node_of("p1") == "a" and h.node_of("p2") is None
    assert not _status(h, "second")


def test_a_device_released_by_the_controller_is_allocated_again(
        harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a", count=1)
    _claim(h, "first")
    _claim(h, "second")
    h.add(_with_claim("p1", "first"), _with_claim("p2", "second"))
    h.cycle()
    assert h.node_of("p2") is None
    h.cluster.patch_status(RESOURCE_CLAIMS, "first", {"status": {
        "allocation": None, "reservedFor": None}}, "default")  # what the controller does
    h.cycle()
    assert h.node_of("p2") == "a" and _devices_of(h, "second") == ["a/gpu0"]


def test_an_out_of_scope_claim_is_given_the_reason(harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a")
    _claim(h, "c", adminAccess=True)
    h.add(_with_claim("p", "c"))
    h.cycle()
    assert h.node_of("p") is None
    assert "adminAccess is not supported by fluence yet" in _reason(h, "p")


def test_a_pod_waits_for_its_template_claim_to_be_made(harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a")
    h.add(pod("p", resourceClaims=claim_entries(gpu="template:t")))
    h.cycle()
    assert h.node_of("p") is None
    assert "waiting for the ResourceClaim of its template claim 'gpu'" in _reason(h, "p")
    found = h.cluster.get(PODS, "p", "default")
    assert found is not None
    owner = {"apiVersion": "v1", "kind": "Pod", "name": "p",
             "uid": found["metadata"]["uid"], "controller": True}
    h.cluster.create(RESOURCE_CLAIMS, make_resource_claim_dict(
        "p-gpu", [make_device_request("r", "gpu")], owners=[owner]))
    h.cluster.patch_status(PODS, "p", {"status": {"resourceClaimStatuses": [
        {"name": "gpu", "resourceClaimName": "p-gpu"}]}}, "default")
    h.cycle()
    assert h.node_of("p") == "a" and _devices_of(h, "p-gpu") == ["a/gpu0"]


def test_a_pod_waiting_for_its_claim_to_be_made_takes_no_backoff(
        harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a")
    h.add(_with_claim("p", "c"))
    h.cycle()
    assert 'ResourceClaim "c" not found' in _reason(h, "p")
    _claim(h, "c")
    h.cycle(after=0)  # the clock has not moved: the claim's arrival is enough
    assert h.node_of("p") == "a"


def test_a_pod_whose_claim_found_no_device_waits_out_its_backoff(
        harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    h.add(_with_claim("p", "c"))
    _claim(h, "c")
    h.cycle()
    assert h.node_of("p") is None
    _devices(h, "a")
    h.cycle(after=0)
    assert h.node_of("p") is None
    h.cycle()
    assert h.node_of("p") == "a"


def test_a_shared_claim_already_allocated_pins_its_next_pod(harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a", "b")
    _devices(h, "a")
    _devices(h, "b")
    _claim(h, "shared")
    h.add(_with_claim("p1", "shared"))
    h.cycle()
    first = h.node_of("p1")
    h.add(_with_claim("p2", "shared"))
    h.cycle()
    assert h.node_of("p2") == first
    assert [r["name"] for r in _status(h, "shared")["reservedFor"]] == ["p1", "p2"]
    assert len(_devices_of(h, "shared")) == 1


def test_a_network_device_is_allocated_from_a_node_it_reaches(harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a", "b")
    h.cluster.patch("nodes", "b", {"metadata": {"labels": {"rack": "r2"}}})
    selector = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r2"]}]}]}
    h.cluster.create(RESOURCE_SLICES, make_resource_slice_dict(
        "qpus", DRIVER, [make_device("qpu0", {"model": "a100"})], node_selector=selector,
        pool="qpus"))
    _claim(h, "c")
    h.add(_with_claim("p", "c"))
    h.cycle()
    assert h.node_of("p") == "b"
    assert _status(h, "c")["allocation"]["nodeSelector"] == selector


class _FailingBind:
    """A cluster whose bind of ``pod`` fails."""

    def __init__(self, inner: FakeCluster, pod: str) -> None:
        self.inner, self.pod = inner, pod

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def bind(self, namespace: str, pod: str, node: str, *, uid: str | None = None) -> None:
        if pod == self.pod:
            raise ApiError(500, "bind refused", "InternalError")
        self.inner.bind(namespace, pod, node, uid=uid)


def test_a_failed_bind_leaves_the_claim_unallocated(harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a")
    _claim(h, "c")
    h.add(_with_claim("p", "c"))
    failing: ClusterAPI = _FailingBind(h.cluster, "p")  # type: ignore[assignment]
    scheduler = Scheduler(failing, load_settings(), clock=h.clock)
    scheduler.start()
    (result,) = scheduler.schedule_once()
    assert result.reason is not None and "bind refused" in result.reason
    claim = h.cluster.get(RESOURCE_CLAIMS, "c", "default")
    assert claim is not None
    assert not (claim.get("status") or {}).get("allocation")
    assert names.CLAIM_PROTECTION_FINALIZER not in (claim["metadata"].get("finalizers") or [])
    assert not scheduler.view.dra.assumed


class _FailingClaimWrite:
    """A cluster whose status write of ``claim`` fails."""

    def __init__(self, inner: FakeCluster, claim: str) -> None:
        self.inner, self.claim = inner, claim

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def patch_status(self, resource: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if resource == RESOURCE_CLAIMS and name == self.claim:
            raise ApiError(409, "the object has been modified", "Conflict")
        return self.inner.patch_status(resource, name, *args, **kwargs)


def test_a_failed_claim_write_binds_no_member_and_takes_back_the_others(
        harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a", "b")
    for n in "ab":
        _devices(h, n)
    h.add(pod_group("g", 2))
    for i in range(2):
        _claim(h, f"c{i}")
        h.add(_with_claim(f"m{i}", f"c{i}", group="g"))
    failing: ClusterAPI = _FailingClaimWrite(h.cluster, "c1")  # type: ignore[assignment]
    scheduler = Scheduler(failing, load_settings(), clock=h.clock)
    scheduler.start()
    (result,) = scheduler.schedule_once()
    assert result.reason is not None and "modified" in result.reason
    assert [h.node_of(f"m{i}") for i in range(2)] == [None, None]
    assert not _status(h, "c0").get("allocation") and not _status(h, "c0").get("reservedFor")


ZONE = "topology.kubernetes.io/zone"


def test_a_gang_required_in_one_zone_gets_its_devices_inside_one(
        harness_factory: Factory) -> None:
    zones = {"a0": "a", "a1": "a", "b0": "b", "b1": "b"}
    h = harness_factory(*(node(n, 8, zone=z) for n, z in zones.items()),
                        resources=f"topology:\n  levels: [{ZONE}]\n")
    h.cluster.create(DEVICE_CLASSES, make_device_class_dict(
        "gpu", f'device.driver == "{DRIVER}"'))
    _devices(h, "a0", count=1)  # zone a holds one device, zone b two
    _devices(h, "b0", count=1)
    _devices(h, "b1", count=1)
    h.add(pod_group("g", 2, topology=[ZONE]))
    for i in range(2):
        _claim(h, f"c{i}")
        h.add(_with_claim(f"m{i}", f"c{i}", group="g"))
    h.cycle()
    assert sorted(h.node_of(f"m{i}") or "" for i in range(2)) == ["b0", "b1"]


def test_a_claim_shared_by_two_members_is_allocated_once_for_both(
        harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a", "b")
    _devices(h, "a", count=1)
    _devices(h, "b", count=1)
    _claim(h, "shared")
    h.add(pod_group("g", 2))
    for i in range(2):
        h.add(_with_claim(f"m{i}", "shared", group="g"))
    h.cycle()
    assert h.node_of("m0") is not None and h.node_of("m0") == h.node_of("m1")
    assert len(_devices_of(h, "shared")) == 1
    assert [r["name"] for r in _status(h, "shared")["reservedFor"]] == ["m0", "m1"]


def test_a_lone_pod_whose_first_fitting_nodes_lack_room_is_placed_on_another(
        harness_factory: Factory) -> None:
    """Claims are checked on enough nodes first (kube-scheduler's early stop at 150
    nodes: 100); when none of those has room for the pod, every node is checked."""
    small = [node(f"n{i:03d}", 1) for i in range(140)]
    big = [node(f"n{i:03d}", 4) for i in range(140, 150)]
    h = harness_factory(*small, *big)
    h.cluster.create(DEVICE_CLASSES, make_device_class_dict(
        "gpu", f'device.driver == "{DRIVER}"'))
    for i in range(150):
        _devices(h, f"n{i:03d}", count=1)
    _claim(h, "c")
    h.add(_with_claim("p", "c", cpu="2"))
    h.cycle()
    where = h.node_of("p")
    assert where is not None and where >= "n140"
    assert _devices_of(h, "c") == [f"{where}/gpu0"]


def test_garbled_slices_and_claims_leave_the_others_placed(harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a")
    h.cluster.create(RESOURCE_SLICES, {"metadata": {"name": "junk"}, "spec": {
        "driver": DRIVER, "pool": "not a pool", "devices": "nor devices"}})
    h.cluster.create(RESOURCE_CLAIMS, {"metadata": {"name": "junk", "namespace": "default"},
                                       "spec": {"devices": {"requests": [{"name": "r"}]}}})
    _claim(h, "good")
    h.add(_with_claim("p", "good"), _with_claim("q", "junk"))
    h.cycle()
    assert h.node_of("p") == "a" and h.node_of("q") is None
    assert "neither exactly nor firstAvailable" in _reason(h, "q")
    assert h.scheduler.view.dra.inventory.devices()


def _deallocate(h: Harness, claim: str) -> None:
    """What the resourceclaim controller does once no pod holds the claim."""
    h.cluster.patch_status(RESOURCE_CLAIMS, claim, {"status": {
        "allocation": None, "reservedFor": None}}, "default")


def _gone(h: Harness, name: str) -> bool:
    return h.cluster.get(PODS, name, "default") is None


def test_a_pod_with_claims_preempts_for_the_devices_its_victim_frees(
        harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a")
    for name in ("low1", "low2", "high"):
        _claim(h, name)
    h.add(_with_claim("low1", "low1", priority=1), _with_claim("low2", "low2", priority=1))
    h.cycle()
    held = {claim: _devices_of(h, claim) for claim in ("low1", "low2")}
    assert sorted(sum(held.values(), [])) == ["a/gpu0", "a/gpu1"]
    h.add(_with_claim("high", "high", priority=100))
    h.cycle()
    # cores abound: the device is the room, so one victim, not both
    victims = [name for name in ("low1", "low2") if _gone(h, name)]
    assert len(victims) == 1, victims
    victim = victims[0]
    h.cycle()
    assert h.node_of("high") is None  # its victim's claim still holds the device
    assert "deallocated" in _reason(h, "high")
    assert _status(h, "high").get("allocation") is None
    _deallocate(h, victim)
    # the device is free now, but held for the nominated pod until it binds
    taken = h.scheduler.view.dra.taken()
    assert any(f"{d.pool}/{d.device}" == held[victim][0] for d in taken)
    h.cycle()
    assert h.node_of("high") == "a"
    assert _devices_of(h, "high") == held[victim]
    survivor = "low2" if victim == "low1" else "low1"
    assert _devices_of(h, survivor) == held[survivor]


def test_a_device_shared_with_a_pod_that_stays_is_freed_by_no_victim(
        harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a", count=1)
    _claim(h, "shared")
    _claim(h, "mine")
    h.add(_with_claim("keeper", "shared", priority=200))
    h.cycle()
    h.add(_with_claim("low", "shared", priority=1))
    h.cycle()
    assert h.node_of("keeper") == "a" == h.node_of("low")
    h.add(_with_claim("high", "mine", priority=100))
    h.cycle()
    h.cycle()
    # evicting low would free no device: keeper, which outranks high, still holds it
    assert not _gone(h, "low")
    assert h.node_of("high") is None
    assert _status(h, "mine").get("allocation") is None


def test_a_gang_with_claims_preempts_the_least_important_devices(
        harness_factory: Factory) -> None:
    h = harness_factory(*(node(n, 8, hostname=True) for n in "abc"))
    h.cluster.create(DEVICE_CLASSES, make_device_class_dict(
        "gpu", f'device.driver == "{DRIVER}"'))
    for n in "abc":
        _devices(h, n)
    lows = {"a0": ("a", 1), "a1": ("a", 1), "b0": ("b", 1), "c0": ("c", 5), "c1": ("c", 5)}
    for name, (where, priority) in lows.items():
        _claim(h, name, 1, f'device.driver == "{DRIVER}"')
        h.add(_with_claim(name, name, priority=priority,
                          nodeSelector={"kubernetes.io/hostname": where}))
    h.cycle()
    assert {name: h.node_of(name) for name in lows} == {n: w for n, (w, _) in lows.items()}
    h.add(pod_group("g", 2))
    for i in range(2):
        _claim(h, f"m{i}", 2)
        h.add(_with_claim(f"m{i}", f"m{i}", group="g", priority=100))
    h.cycle()
    # two whole nodes of devices are needed: a and b hold only priority-1 claims, and b
    # frees its second device with one victim; c's priority-5 pods stay
    assert sorted(n for n in lows if _gone(h, n)) == ["a0", "a1", "b0"]
    assert [h.node_of(f"m{i}") for i in range(2)] == [None, None]
    for name in ("a0", "a1", "b0"):
        _deallocate(h, name)
    h.cycle()
    assert sorted(h.node_of(f"m{i}") or "" for i in range(2)) == ["a", "b"]
    taken = [d for name in ("m0", "m1", "c0", "c1") for d in _devices_of(h, name)]
    assert len(taken) == 6 == len(set(taken))


def test_a_zone_required_gang_with_claims_preempts_inside_one_zone_only(
        harness_factory: Factory) -> None:
    zones = {"a0": "a", "a1": "a", "b0": "b", "b1": "b"}
    h = harness_factory(*(node(n, 8, zone=z, hostname=True) for n, z in zones.items()),
                        resources=f"topology:\n  levels: [{ZONE}]\n")
    h.cluster.create(DEVICE_CLASSES, make_device_class_dict(
        "gpu", f'device.driver == "{DRIVER}"'))
    priorities = {"a0": 1, "a1": 5, "b0": 1, "b1": 3}
    for name, priority in priorities.items():
        _devices(h, name, count=1)
        _claim(h, f"low-{name}")
        h.add(_with_claim(f"low-{name}", f"low-{name}", priority=priority,
                          nodeSelector={"kubernetes.io/hostname": name}))
    h.cycle()
    assert all(h.node_of(f"low-{n}") == n for n in zones)
    h.add(pod_group("g", 2, topology=[ZONE]))
    for i in range(2):
        _claim(h, f"c{i}")
        h.add(_with_claim(f"m{i}", f"c{i}", group="g", priority=100))
    h.cycle()
    # a0 and b0 (both priority 1) would be the cheapest pair, but they span two zones;
    # inside one, zone b's victims (at most priority 3) hurt less than zone a's (5)
    assert sorted(n for n in zones if _gone(h, f"low-{n}")) == ["b0", "b1"]
    for name in ("b0", "b1"):
        _deallocate(h, f"low-{name}")
    h.cycle()
    assert sorted(h.node_of(f"m{i}") or "" for i in range(2)) == ["b0", "b1"]
    assert sorted(d for i in range(2) for d in _devices_of(h, f"c{i}")) == [
        "b0/gpu0", "b1/gpu0"]


def test_a_promised_device_another_scheduler_allocates_meanwhile_is_never_given_twice(
        harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a", count=1)
    for name in ("low", "high", "theirs"):
        _claim(h, name)
    h.add(_with_claim("low", "low", priority=1))
    h.cycle()
    h.add(_with_claim("high", "high", priority=100))
    h.cycle()
    assert _gone(h, "low")
    # kube-scheduler, which does not see the nomination, takes the freed device
    _deallocate(h, "low")
    h.cluster.patch_status(RESOURCE_CLAIMS, "theirs", {"status": {"allocation": {"devices": {
        "results": [{"request": "r", "driver": DRIVER, "pool": "a", "device": "gpu0"}]}}}},
        "default")
    h.cycle()
    assert h.node_of("high") is None
    assert _status(h, "high").get("allocation") is None
    assert "default/high" not in h.scheduler.cycle.preemptor.nominations


class _RefusingClaimWriteOnce:
    """A cluster that refuses the first status write of ``claim`` (a webhook or an
    apiserver hiccup), then accepts: nothing in the cluster changes meanwhile."""

    def __init__(self, inner: FakeCluster, claim: str) -> None:
        self.inner, self.claim, self.refused = inner, claim, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def patch_status(self, resource: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        if resource == RESOURCE_CLAIMS and name == self.claim and not self.refused:
            self.refused += 1
            raise ApiError(500, "etcdserver: request timed out", "InternalError")
        return self.inner.patch_status(resource, name, *args, **kwargs)


def test_a_pod_whose_claim_write_was_refused_is_tried_again_after_its_backoff(
        harness_factory: Factory) -> None:
    h = _setup(harness_factory, "a")
    _devices(h, "a")
    _claim(h, "shared")
    h.add(_with_claim("p1", "shared"))
    h.cycle()
    assert h.node_of("p1") == "a"
    refusing = _RefusingClaimWriteOnce(h.cluster, "shared")
    scheduler = Scheduler(refusing, load_settings(),  # type: ignore[arg-type]
                          clock=h.clock)
    scheduler.start()
    h.add(_with_claim("p2", "shared"))
    scheduler.pump()
    (result,) = scheduler.schedule_once()
    assert refusing.refused == 1 and result.reason is not None
    assert "request timed out" in result.reason
    scheduler.pump()
    h.now += 0.5  # within the first backoff (1 s): not tried yet
    assert scheduler.schedule_once() == []
    assert scheduler.next_wakeup() == 1.0 + h.now - 0.5
    h.now += 1.0  # nothing changed in the cluster; the backoff alone brings it back
    scheduler.pump()
    scheduler.schedule_once()
    assert h.node_of("p2") == "a"
    assert [r["name"] for r in _status(h, "shared")["reservedFor"]] == ["p1", "p2"]
