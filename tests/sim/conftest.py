"""Small scenarios for the simulator's tests (each runs in well under a second)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from fluence_core import names
from fluence_core.sim.scenario import Scenario, parse_scenario

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "sim"

CONTENTION = """
name: small-contention
experiment: gang-contention
seed: 3
schedulers: [fluence, first-fit]
cluster: {nodes: [{count: 4, cpu: 4, memory: 16Gi}]}
workload:
  - name: lammps
    sizes: [1, 2, 4]
    count: 2
    shuffle: true
    arrive: {start: 0, every: 1}
    cpu: 3
    memory: 4Gi
    runtime: {min: 60, max: 90}
"""

TWO_QUEUE = """
name: small-two-queue
experiment: two-queue
seed: 4
schedulers: [fluence, gang-ungated]
repeats: 2
cluster: {nodes: [{count: 4, cpu: 4, memory: 16Gi}]}
backends:
  quick: {depth: 0.5, service: {min: 2, max: 6}, task_overhead: 20}
  slow: {depth: 20, service: {min: 20, max: 40}, task_overhead: 20}
workload:
  - {name: qaoa, size: 2, cpu: 1, memory: 1Gi, runtime: 30, quantum: {type: qpu, shots: 100}}
sweep: {backends: [quick, slow], sizes: [2, 4]}
"""

SELECTION = """
name: small-selection
experiment: selection
seed: 5
schedulers: [fluence]
policies: [random, min-cost, min-queue]
repeats: 4
cluster: {nodes: [{count: 2, cpu: 4, memory: 16Gi}]}
backends:
  pricey: {depth: 5, service: {min: 5, max: 10}, price_per_task: 0.3, price_per_shot: 0.03}
  cheap: {depth: 30, service: {min: 5, max: 10}, price_per_task: 0.3, price_per_shot: 0.001}
  middle: {depth: 10, service: {min: 5, max: 10}, price_per_task: 0.3, price_per_shot: 0.01}
workload:
  - {name: qaoa, size: 2, cpu: 1, memory: 1Gi, runtime: 30, quantum: {type: qpu, shots: 1000}}
"""


@pytest.fixture(autouse=True)
def quiet() -> Iterator[None]:
    """The scheduler logs every bind at INFO; the simulator's tests do not need it."""
    log = logging.getLogger(names.LOGGER_NAME)
    level = log.level
    log.setLevel(logging.WARNING)
    yield
    log.setLevel(level)


@pytest.fixture
def contention() -> Scenario:
    return parse_scenario(CONTENTION, "contention.yaml")


@pytest.fixture
def two_queue() -> Scenario:
    return parse_scenario(TWO_QUEUE, "two-queue.yaml")


@pytest.fixture
def selection_scenario() -> Scenario:
    return parse_scenario(SELECTION, "selection.yaml")
