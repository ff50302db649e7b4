"""A slot naming a device demand: the embedded matcher takes the demand with the cores."""

from __future__ import annotations

import pytest

from fluence_core.dra.claims import Claim
from fluence_core.dra.demands import DemandLedger, demands_of
from fluence_core.dra.devices import DeviceId
from fluence_core.dra.state import DraState
from fluence_core.errors import MatcherError
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.matcher.jobspec import compute_jobspec
from fluence_core.models import NodeInfo, PodRequest
from fluence_core.testing import (
    make_device, make_device_class_dict, make_device_request, make_resource_claim_dict,
    make_resource_slice_dict,
)


DRIVER = "gpu.example.com"


def _ledger() -> DemandLedger:
    """The scheduler's ledger over one GPU, on node b, and a claim asking for one."""
    state = DraState()
    state.replace("resourceslices", [make_resource_slice_dict(
        "b-gpus", DRIVER, [make_device("gpu0")], node="b")])
    state.replace("deviceclasses", [make_device_class_dict("gpu", f'device.driver == "{DRIVER}"')])
    claim = make_resource_claim_dict("c", [make_device_request("r", "gpu")])
    claim["metadata"]["resourceVersion"] = "1"
    state.replace("resourceclaims", [claim])
    read = state.claim("default", "c")
    assert isinstance(read, Claim)
    found = demands_of(state, [[read]], {})
    assert found is not None and found[0] is not None
    return DemandLedger(state, {}, {"d1": found[0]})


def _graph() -> ResourceGraph:
    return ResourceGraph([NodeInfo(name=n, cores=4, memory_mib=4096) for n in "ab"])


def _jobspec(count: int) -> dict[str, object]:
    return compute_jobspec([PodRequest(f"p{i}", devices=("d1", 1)) for i in range(count)])


def test_a_slot_goes_where_its_devices_are_and_gives_them_back_when_cancelled() -> None:
    graph = _graph()
    ledger = _ledger()
    graph.device_demands = ledger
    matcher = EmbeddedMatcher(graph)
    allocation = matcher.match_allocate(_jobspec(1))
    assert allocation is not None and [s.node for s in allocation.nodes] == ["b"]
    assert [t.node for t in ledger.held.values()] == ["b"]
    assert [p.device.id.device for t in ledger.held.values() for p in t.picked] == ["gpu0"]
    assert matcher.match_allocate(_jobspec(1)) is None  # b's one device is taken
    matcher.cancel(allocation.jobid)
    assert ledger.held == {}


def test_a_group_whose_devices_do_not_all_fit_takes_none() -> None:
    graph = _graph()
    ledger = _ledger()
    graph.device_demands = ledger
    assert EmbeddedMatcher(graph).match_allocate(_jobspec(2)) is None
    assert ledger.held == {}


def test_a_demand_with_no_ledger_registered_is_an_error_naming_it() -> None:
    with pytest.raises(MatcherError, match="no device demands are registered"):
        EmbeddedMatcher(_graph()).match_allocate(_jobspec(1))


def test_nodes_whose_devices_look_alike_share_a_signature_until_one_is_taken() -> None:
    state = DraState()
    state.replace("resourceslices", [make_resource_slice_dict(
        f"{n}-gpus", DRIVER, [make_device("gpu0", {"model": "t4"})], node=n) for n in "abc"]
        + [make_resource_slice_dict("c-more", DRIVER, [make_device("gpu1", {"model": "a100"})],
                                    node="c", pool="c-more")])
    state.replace("deviceclasses", [make_device_class_dict("gpu", f'device.driver == "{DRIVER}"')])
    ledger = DemandLedger(state, {}, {})
    assert ledger.signature("a") == ledger.signature("b") != ledger.signature("c")
    ledger.used.add(DeviceId(DRIVER, "a", "gpu0"))
    assert ledger.signature("a") != ledger.signature("b")
