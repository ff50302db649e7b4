"""The fluence-fluxion plugin: finding the library, choosing the matcher, talking to reapi_cli.

Tests that need flux-sched's library skip unless ``FLUENCE_FLUXION_LIB`` names it.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fluence_core.api import (
    Level,
    MatcherError,
    MatchOutcome,
    NodeInfo,
    PodRequest,
    ResourceGraph,
    load_settings,
)
from fluence_core.testing import EmbeddedMatcher, compute_jobspec, get_plugin_manager
from fluence_fluxion import binding, plugin
from fluence_fluxion.binding import library_path
from fluence_fluxion.matcher import FluxionMatcher, check_jgf, load_library

LIBRARY = os.environ.get("FLUENCE_FLUXION_LIB")
needs_library = pytest.mark.skipif(
    not LIBRARY, reason="FLUENCE_FLUXION_LIB is not set (path to flux-sched's libreapi_cli.so)"
)


def _graph(nodes: int = 2, cores: int = 4) -> ResourceGraph:
    return ResourceGraph([NodeInfo(f"n{i}", cores, cores * 1024) for i in range(nodes)])


def test_library_path_accepts_a_file_or_an_install_prefix(tmp_path: Path) -> None:
    library = tmp_path / "lib" / "flux" / "libreapi_cli.so"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"")
    assert library_path(tmp_path) == library
    assert library_path(library) == library


def test_library_path_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="no libreapi_cli.so under"):
        library_path(tmp_path)
    with pytest.raises(OSError, match="does not exist"):
        library_path(tmp_path / "nope.so")


def test_without_the_library_the_embedded_matcher_stays_in_charge(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("FLUENCE_FLUXION_LIB", raising=False)
    monkeypatch.setattr(binding, "PREFIXES", (str(tmp_path),))
    settings = load_settings()
    manager = get_plugin_manager(settings)
    matcher = manager.hook.fluence_matcher(settings=settings, graph=_graph())
    assert isinstance(matcher, EmbeddedMatcher)
    assert "FLUENCE_FLUXION_LIB is not set" in manager.infos["fluxion"].status
    assert f"no libreapi_cli.so is under {tmp_path}" in manager.infos["fluxion"].status


def test_unset_it_looks_where_flux_sched_installs_its_library(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("FLUENCE_FLUXION_LIB", raising=False)
    installed = tmp_path / "usr-local" / "lib" / "flux" / "libreapi_cli.so"
    installed.parent.mkdir(parents=True)
    installed.write_bytes(b"not an ELF file")  # found, then refused by the loader: named
    monkeypatch.setattr(binding, "PREFIXES", (str(tmp_path / "usr"), str(tmp_path / "usr-local")))
    assert binding.installed_library() == installed
    assert plugin.plugin_status().startswith(f"inactive: cannot load {installed}")


def test_an_unloadable_library_is_reported_in_the_plugin_status(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    broken = tmp_path / "libreapi_cli.so"
    broken.write_bytes(b"not an ELF file")
    monkeypatch.setenv("FLUENCE_FLUXION_LIB", str(broken))
    assert plugin.plugin_status().startswith(f"inactive: cannot load {broken}")
    assert plugin.fluence_matcher(load_settings(), _graph()) is None


def test_a_non_string_property_is_refused_before_fluxion_sees_it() -> None:
    jgf = _graph().to_jgf()
    jgf["graph"]["nodes"][1]["metadata"]["properties"] = {"virtual=false": 1}
    with pytest.raises(MatcherError, match="non-string value"):
        check_jgf(jgf)


@needs_library
def test_with_the_library_the_fluxion_matcher_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_FLUXION_LIB", str(LIBRARY))
    settings = load_settings()
    manager = get_plugin_manager(settings)
    assert isinstance(
        manager.hook.fluence_matcher(settings=settings, graph=_graph()), FluxionMatcher
    )
    assert manager.infos["fluxion"].status.startswith("active:")


@needs_library
def test_busy_and_unsatisfiable_are_told_apart_from_errno() -> None:
    matcher = FluxionMatcher(_graph(), "first", load_library(str(LIBRARY)))
    whole = compute_jobspec([PodRequest(f"p{i}", cores=4) for i in range(2)])
    assert matcher.match_allocate(whole) is not None
    assert matcher.match_allocate(whole) is None
    assert matcher.last_outcome is MatchOutcome.BUSY
    too_big = compute_jobspec([PodRequest("big", cores=5)])
    assert matcher.match_allocate(too_big) is None
    assert matcher.last_outcome is MatchOutcome.UNSATISFIABLE
    assert matcher.satisfiable(whole) and not matcher.satisfiable(too_big)


@needs_library
def test_every_match_fitting_or_not_is_counted_with_fluxions_own_time() -> None:
    matcher = FluxionMatcher(_graph(), "first", load_library(str(LIBRARY)))
    assert matcher.match_allocate(compute_jobspec([PodRequest("a", cores=1)])) is not None
    assert matcher.match_allocate(compute_jobspec([PodRequest("x", cores=99)])) is None
    assert matcher.matches == 2
    assert 0 < matcher.match_seconds < 10


@needs_library
def test_job_ids_come_from_fluence_and_survive_failed_matches() -> None:
    matcher = FluxionMatcher(_graph(), "first", load_library(str(LIBRARY)))
    first = matcher.match_allocate(compute_jobspec([PodRequest("a", cores=1)]))
    assert matcher.match_allocate(compute_jobspec([PodRequest("x", cores=99)])) is None
    second = matcher.match_allocate(compute_jobspec([PodRequest("b", cores=1)]))
    assert first is not None and second is not None
    assert second.jobid > first.jobid
    assert matcher.cancel(first.jobid) and not matcher.cancel(first.jobid)


@needs_library
def test_a_restore_that_overlaps_a_held_allocation_is_refused() -> None:
    library = load_library(str(LIBRARY))
    graph = _graph(nodes=1)
    matcher = FluxionMatcher(graph, "lonode", library)
    held = matcher.match_allocate(compute_jobspec([PodRequest("a", cores=4)]))
    assert held is not None
    other = FluxionMatcher(graph, "lonode", library)
    assert other.match_allocate(compute_jobspec([PodRequest("b", cores=4)])) is not None
    record = dataclasses.replace(held, jobid=99)
    with pytest.raises(MatcherError, match="cannot restore job 99: .* is already held by job 1"):
        other.restore(record)


@needs_library
def test_a_record_of_a_node_the_graph_lacks_is_refused_as_a_matcher_error() -> None:
    """A record left on the cluster for a node this scheduler's graph does not hold was a
    KeyError out of restore, which stopped ``fluence up`` at start; a MatcherError lets
    restore account the pod conservatively instead."""
    library = load_library(str(LIBRARY))
    held = FluxionMatcher(_graph(nodes=2), "lonode", library).match_allocate(
        compute_jobspec([PodRequest("a", cores=4), PodRequest("b", cores=4)]))
    assert held is not None and len({share.node for share in held.nodes}) == 2
    smaller = FluxionMatcher(_graph(nodes=1), "lonode", library)
    with pytest.raises(MatcherError, match="cannot restore job 1: node .* is not in the graph"):
        smaller.restore(held)


@needs_library
def test_adding_a_node_keeps_what_is_held() -> None:
    matcher = FluxionMatcher(_graph(nodes=1), "lonode", load_library(str(LIBRARY)))
    held = matcher.match_allocate(compute_jobspec([PodRequest("a", cores=4)]))
    assert held is not None
    matcher.add_node(NodeInfo("n9", 4, 4096))
    placed = matcher.match_allocate(compute_jobspec([PodRequest("b", cores=4)]))
    assert placed is not None and placed.nodes[0].node == "n9"
    assert held.jobid in matcher.allocations()


@needs_library
def test_a_held_virtual_resource_is_busy_not_unsatisfiable() -> None:
    from fluence_core.testing import parse_resource_config, virtual_jobspec

    config = parse_resource_config("resources:\n  - {type: qpu, name: cepheus}\n")
    matcher = FluxionMatcher(
        ResourceGraph([NodeInfo("n0", 4, 4096)], config), "first", load_library(str(LIBRARY))
    )
    jobspec = virtual_jobspec("qpu", 1, {})
    assert matcher.match_allocate(jobspec) is not None
    assert matcher.match_allocate(jobspec) is None
    assert matcher.last_outcome is MatchOutcome.BUSY
    assert matcher.match_allocate(virtual_jobspec("qpu", 2, {})) is None
    assert matcher.last_outcome is MatchOutcome.UNSATISFIABLE


def test_fluence_plugins_check_names_an_inactive_fluxion(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.so"
    env = {**os.environ, "FLUENCE_FLUXION_LIB": str(missing), "COLUMNS": "250"}
    done = subprocess.run([sys.executable, "-m", "fluence_core.cli", "plugins", "--check"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"plugins not working: fluxion (inactive: cannot load {missing}" in done.stderr


def test_a_held_vertex_belongs_to_the_nearest_node_above_it_at_any_depth() -> None:
    from fluence_fluxion.matcher import _owning_node

    at = {"/cluster0/z1/r1/n0": "n0", "/cluster0/n1": "n1"}
    assert _owning_node("/cluster0/z1/r1/n0/core3", at) == "n0"
    assert _owning_node("/cluster0/z1/r1/n0/socket0/core3", at) == "n0"
    assert _owning_node("/cluster0/n1/memory0", at) == "n1"
    with pytest.raises(MatcherError, match="under no known node"):
        _owning_node("/cluster0/z1/r1/n9/core0", at)


@needs_library
def test_a_racked_graph_loads_and_what_it_allocates_is_read_back_to_its_nodes() -> None:
    rack = "topology.kubernetes.io/rack"
    nodes = [NodeInfo(f"r{r}-n{n}", 4, 4096, labels={rack: f"r{r}"})
             for r in range(2) for n in range(2)]
    graph = ResourceGraph(nodes, levels=[Level(rack, "rack")])
    matcher = FluxionMatcher(graph, "first", load_library(LIBRARY or ""))
    in_r1 = {"hostlist": ["r1-n0", "r1-n1"]}
    allocation = matcher.match_allocate(
        compute_jobspec([PodRequest(f"p{i}", cores=4) for i in range(2)], in_r1))
    assert allocation is not None
    assert sorted(s.node for s in allocation.nodes) == ["r1-n0", "r1-n1"]
    assert all(len(s.cores) == 4 for s in allocation.nodes)
    matcher.set_node_down("r0-n0")  # a node path of depth 3 is found by its status call
    assert matcher.cancel(allocation.jobid)


# -- Fluxion's vertex types are fixed at a process's first graph load ----------------------------

_FLAT_THEN_LEVELLED = """
import sys
from fluence_core.api import Level, NodeInfo, PodRequest, ResourceGraph
from fluence_core.testing import compute_jobspec
from fluence_fluxion.matcher import FluxionMatcher, load_library

library = load_library(sys.argv[1])
label = sys.argv[2]
flat = FluxionMatcher(ResourceGraph([NodeInfo("n0", 2, 2048)]), "first", library)
assert flat.match_allocate(compute_jobspec([PodRequest("a", cores=2)])) is not None
nodes = [NodeInfo(f"n{i}", 2, 2048, labels={label: f"d{i}"}) for i in range(2)]
levelled = FluxionMatcher(ResourceGraph(nodes, levels=[Level(label, sys.argv[3])]),
                          "first", library)
allocation = levelled.match_allocate(
    compute_jobspec([PodRequest("b", cores=2)], {"hostlist": ["n1"]}))
assert allocation is not None, levelled.last_error
print("placed on", [share.node for share in allocation.nodes])
"""


def _in_a_fresh_process(level_label: str, level_type: str) -> subprocess.CompletedProcess[str]:
    """Runs the flat-then-levelled script where no graph was loaded before (the interner is
    per process, and this test process has loaded graphs already)."""
    return subprocess.run(
        [sys.executable, "-c", _FLAT_THEN_LEVELLED, str(LIBRARY), level_label, level_type],
        capture_output=True, text=True, timeout=120,
    )


@needs_library
def test_a_graph_with_a_zone_level_loads_after_a_flat_graph_in_one_process() -> None:
    done = _in_a_fresh_process("topology.kubernetes.io/zone", "zone")
    assert done.returncode == 0, done.stderr
    assert "placed on ['n1']" in done.stdout


@needs_library
def test_a_level_type_new_to_the_process_is_refused_by_name_with_a_restart_asked() -> None:
    done = _in_a_fresh_process("example.com/cabinet", "cabinet")
    assert done.returncode != 0
    assert "MatcherError: Fluxion cannot load vertex type 'cabinet'" in done.stderr
    assert "restart Fluence" in done.stderr
    assert "interner is finalized" not in done.stderr


def test_the_primer_graph_holds_one_vertex_of_each_type_under_the_cluster() -> None:
    from fluence_fluxion.types import primer_jgf

    jgf = primer_jgf({"cluster", "node", "zone"})
    kinds = [v["metadata"]["type"] for v in jgf["graph"]["nodes"]]
    assert kinds == ["cluster", "node", "zone"]
    assert [e["source"] for e in jgf["graph"]["edges"]] == ["0", "0"]
    check_jgf(jgf)
