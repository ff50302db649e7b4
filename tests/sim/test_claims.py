"""``fluence sim`` with the QPU asked for by ResourceClaim: the two-queue advantage holds.

The scenario of tests/sim/conftest.py's ``TWO_QUEUE``, its quantum jobs asking for their
backend through a claim of the QPU driver's class (``quantum.claim: true``): the
simulated driver publishes the backends, the split keeps the claim on the scout, the
scheduler allocates it, and the scout's sidecar reads its backend from it.
"""

from __future__ import annotations

from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.api import PODS, RESOURCE_CLAIMS
from fluence_core.sim import parse_scenario, run_scenario
from fluence_core.sim.experiments import JobPlan
from fluence_core.sim.scenario import QuantumSpec, Scenario, ScenarioError
from fluence_core.sim.world import Run
from tests.sim.conftest import TWO_QUEUE

BY_RESOURCE = "quantum: {type: qpu, shots: 100}"
BY_CLAIM = "quantum: {type: qpu, shots: 100, claim: true}"


@pytest.fixture
def by_claim() -> Scenario:
    assert BY_RESOURCE in TWO_QUEUE
    return parse_scenario(TWO_QUEUE.replace(BY_RESOURCE, BY_CLAIM), "two-queue-claims.yaml")


def _allocations(run: Run, claim: str) -> list[dict[str, Any]]:
    """Every allocation the claim's history shows (it is deleted with its job)."""
    return [obj["status"]["allocation"]
            for _event, obj in run.cluster.watch(RESOURCE_CLAIMS, "default", resource_version="1",
                                                 timeout=0)
            if obj["metadata"]["name"] == claim and (obj.get("status") or {}).get("allocation")]


def test_gated_workers_idle_less_than_ungated_ones_when_the_qpu_is_claimed(
        by_claim: Scenario) -> None:
    rows = run_scenario(by_claim)["summary"]["rows"]
    for row in rows:
        assert row["fluence"] < row["gang-ungated"], row
    slow = [r for r in rows if r["backend"] == "slow"]
    quick = [r for r in rows if r["backend"] == "quick"]
    assert min(r["ratio_gang-ungated"] for r in slow) > max(r["ratio_gang-ungated"] for r in quick)


def test_the_scout_holds_the_claim_and_its_sidecar_reads_the_backend_from_it(
        by_claim: Scenario) -> None:
    plan = JobPlan("qaoa-4", "qaoa", 4, 0.0, "1", "1Gi", 30.0,
                   QuantumSpec(backend="slow", shots=100, claim=True))
    run = Run(by_claim, "fluence", [plan], seed=("test", 1)).execute()
    job = run.jobs["qaoa-4"]
    assert job.done_at is not None and job.backend == "slow"
    assert job.sidecar is not None and job.sidecar.outcome.value == names.SCOUT_STATUS_READY
    [allocation] = _allocations(run, "qaoa-4-qpu")[-1:]
    [device] = allocation["devices"]["results"]
    assert device["driver"] == names.QPU_DRA_DRIVER and device["device"].startswith("slow0-")
    scout = run.cluster.get(PODS, job.pods[0].name)
    assert scout is not None
    assert scout["spec"]["resourceClaims"] == [{"name": "qpu", "resourceClaimName": "qaoa-4-qpu"}]
    assert not any(names.virtual_type_of(k) for k in scout["spec"]["containers"][0]["resources"]
                   ["requests"])
    for index in (1, 2, 3):
        worker = run.cluster.get(PODS, job.pods[index].name)
        assert worker is not None and not worker["spec"].get("resourceClaims")
        assert worker["metadata"]["annotations"][names.BACKEND_ANNOTATION] == "slow"
    assert run.cluster.get(RESOURCE_CLAIMS, "qaoa-4-qpu") is None  # deleted with its job


def test_the_first_fit_arm_cannot_run_claims() -> None:
    text = TWO_QUEUE.replace(BY_RESOURCE, BY_CLAIM).replace(
        "schedulers: [fluence, gang-ungated]", "schedulers: [fluence, first-fit]")
    with pytest.raises(ScenarioError, match=r"workload\[0\]\.quantum\.claim: the first-fit"):
        parse_scenario(text, "x.yaml")
