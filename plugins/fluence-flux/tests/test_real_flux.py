"""The handler's init.sh and entrypoint.sh, unmodified, as three real Flux brokers.

Skipped unless ``FLUENCE_TEST_FLUX_CORE`` names a flux-core install prefix (its
``bin/flux``); that prefix is the flux view init.sh copies, as the init
container copies the view image's. The ConfigMap and Secret are the ones the
handler makes for an opted-in Indexed Job ``lmp`` of three completions; each
rank is a pod stand-in (see ``flux_pods``). Run with ``-s`` to see Flux's own
output, which the tests also print.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import pytest
from fluence_flux import scripts
from fluence_flux import workload as wl
from fluence_flux.handler import FluxHandler
from fluence_flux.settings import FluxSettings
from flux_helpers import job
from flux_pods import Pods, unavailable

NODES = 3
START_TIMEOUT = 30
"""FLUENCE_FLUX_START_TIMEOUT of these runs: long enough for a loaded two-core machine."""


def flux_prefix() -> Path:
    prefix = os.environ.get("FLUENCE_TEST_FLUX_CORE")
    if not prefix:
        pytest.skip("FLUENCE_TEST_FLUX_CORE is not set: point it at a flux-core install prefix")
    path = Path(prefix)
    if not (path / "bin" / "flux").is_file():
        pytest.skip(f"FLUENCE_TEST_FLUX_CORE={prefix} has no bin/flux")
    return path


@pytest.fixture(scope="module")
def pods(tmp_path_factory):
    prefix = flux_prefix()
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    work = tmp_path_factory.mktemp("real-flux")
    workload = wl.read(job("lmp", nodes=NODES), "default")
    handler = FluxHandler(FluxSettings(view_path=str(prefix), start_timeout=START_TIMEOUT))
    made = {body["kind"]: body for _, body in handler.objects(workload)}
    mounted = work / "scripts"  # the projected volume: ConfigMap scripts and the Secret's cert
    mounted.mkdir()
    for name, text in made["ConfigMap"]["data"].items():
        (mounted / name).write_text(text)
    (mounted / "curve.cert").write_bytes(base64.b64decode(made["Secret"]["data"]["curve.cert"]))
    with Pods(work, [f"{workload.host_prefix}{r}" for r in range(NODES)],
              workload.subdomain, mounted) as ranks:
        for rank in range(NODES):
            done = ranks.init(rank)
            assert done.returncode == 0, done.stderr
        yield ranks


def show(exits) -> None:
    for rank, ended in sorted(exits.items()):
        print(f"--- rank {rank}: status {ended.status} after {ended.seconds:.1f}s")
        print(ended.stdout, end="")
        print(ended.stderr, end="")


TASK = ('echo "task $FLUX_TASK_RANK on $(hostname)"; '
        'if [ "$FLUX_TASK_RANK" = 0 ]; then flux resource list; '
        'flux module list | while read -r name _ _ _ _ services; do '
        'if [ "$services" = sched ]; then echo "scheduler: $name"; fi; done; fi')


def test_the_instance_forms_and_the_command_runs_on_every_rank(pods):
    exits = pods.run(["/bin/bash", "-c", TASK])
    show(exits)
    assert [exits[r].status for r in range(NODES)] == [0] * NODES
    out = exits[0].stdout
    assert sorted(re.findall(r"^task \d on (\S+)$", out, re.M)) == ["lmp-0", "lmp-1", "lmp-2"]
    # flux resource list, run by task 0 inside the job: the job holds all three nodes.
    states = {row[0]: row[1:] for row in (line.split() for line in out.splitlines())
              if row and row[0] in ("free", "allocated", "down")}
    assert states["allocated"][0] == str(NODES) and states["allocated"][-1] == "lmp-[0-2]", states
    assert states["free"][0] == states["down"][0] == "0", states
    # Fluxion when flux-sched is installed in the prefix, else flux-core's own.
    assert re.search(r"^scheduler: (sched-fluxion-qmanager|sched-simple)$", out, re.M), out


def test_the_commands_exit_status_is_rank_zeros(pods):
    exits = pods.run(["/bin/bash", "-c", 'test "$(hostname)" != lmp-2 || exit 3'])
    show(exits)
    assert exits[0].status == 3
    assert all(exits[r].status is not None for r in range(1, NODES))  # the instance ended


def test_a_rank_that_never_comes_up_fails_rank_zero_after_the_timeout(pods):
    exits = pods.run(["hostname"], ranks=[0, 1], timeout=START_TIMEOUT + 150)
    show(exits)
    assert exits[0].status == scripts.START_TIMEOUT_EXIT
    assert START_TIMEOUT <= exits[0].seconds < START_TIMEOUT + 120
    assert "never came up: lmp-2" in exits[0].stderr
    assert exits[1].status is not None  # rank 1 left with the instance, it did not hang
