"""The Fluxion matcher: jobspecs go to flux-sched's ``reapi_cli``, allocations come back as JGF.

The library's behaviour this matcher is written around is listed on
:class:`FluxionMatcher`.
"""

from __future__ import annotations

import errno
import json
from typing import Any, Mapping, Sequence

from fluence_core.api import (
    Allocation,
    MatchOutcome,
    MatcherError,
    MatchPolicy,
    NodeInfo,
    NodeShare,
    ResourceGraph,
    VirtualShare,
    ZoneLoad,
    logger,
)

from fluence_fluxion.binding import Library, ffi, library_path
from fluence_fluxion.numa import one_zone_jobspec
from fluence_fluxion.types import ensure_types

_ERRNO_OUTCOME = {errno.EBUSY: MatchOutcome.BUSY, errno.ENODEV: MatchOutcome.UNSATISFIABLE}


def load_library(setting: str) -> Library:
    """Load ``libreapi_cli.so`` from a file path or an install prefix."""
    return Library(library_path(setting))


def check_jgf(jgf: Mapping[str, Any]) -> None:
    """Refuse a graph Fluxion would abort on: every property value must be a string."""
    for vertex in jgf["graph"]["nodes"]:
        for key, value in (vertex["metadata"].get("properties") or {}).items():
            if not isinstance(value, str):
                raise MatcherError(
                    f"vertex {vertex['id']}: property {key!r} has a non-string value {value!r}"
                )


class FluxionMatcher:
    """A :class:`fluence_core.api.Matcher` backed by one ``reapi_cli`` context.

    Facts of the library this class is written around:

    * it must be initialised with ``load_format: jgf`` (its default is another
      format) and ``match_format: jgf`` (an unknown format silently becomes
      ``simple``);
    * a failed match returns only ``errno``: ``EBUSY`` = does not fit now,
      ``ENODEV`` = can never fit; the text comes from :class:`MatchOutcome`. For a
      held virtual vertex allocate-with-satisfiability answers ``ENODEV`` although
      ``match_satisfy`` calls the same jobspec satisfiable, so an ``ENODEV`` is
      confirmed with ``match_satisfy`` before it is reported;
    * its job-id counter advances even on failure, so Fluence hands out its own ids
      (``match_with_jobid``) and a restore can re-hold any recorded id;
    * a property value that is not a string aborts the process, so the graph is
      checked before it is loaded;
    * it interns vertex type names in one process-wide table that every
      ``reapi_cli_initialize`` closes, so the first graph a process loads fixes the
      types any later graph or jobspec may name; :func:`fluence_fluxion.types.ensure_types`
      primes it once with every type Fluence may emit and refuses, by name, a type
      the process never interned (a restart is needed);
    * every string it returns (R, R_out, error messages, modes) is ``strdup``-ed and
      freed here;
    * ``update_allocate`` does not refuse an allocation that overlaps a held one,
      so :meth:`FluxionMatcher.restore` checks overlap itself;
    * it places a slot at the first vertex whose own children hold every type the slot asks
      for, so under a node with ``numanode`` vertices a slot's cores come from one zone, and
      a ``numanode`` named inside a slot is held whole: :class:`~fluence_core.api.ZoneLoad`
      says which nodes get zones, :mod:`fluence_fluxion.numa` how a one-zone pod is asked;
    * it refuses sibling slots of one type in a jobspec, so a group with several
      pod shapes is several jobspecs; this matcher offers no joint match, and
      :func:`fluence_core.matcher.group.match_group` sends them most-constrained first and
      retries other orders (its docstring gives the bound).
    """

    name = "fluxion"

    def __init__(self, graph: ResourceGraph, policy: MatchPolicy | str, library: Library, *,
                 numa: ZoneLoad = ZoneLoad.POLICY) -> None:
        self.graph = graph
        self.numa = numa
        """Which nodes' NUMA zones are loaded as ``numanode`` vertices
        (``FLUENCE_FLUXION_NUMA``): on those every whole-core pod stays inside one zone
        (Fluxion finds a slot's cores under one vertex), elsewhere pods span zones."""
        self.policy = MatchPolicy(policy)
        self.lib = library
        self._destroy = library.api.reapi_cli_destroy
        """Looked up now: cffi makes a library's functions on first use under its own lock,
        and ``__del__`` can run inside that lock (a collection during a ``dlopen``), where
        the lookup would wait for itself."""
        self._jobs: dict[int, Allocation] = {}
        self._holder: dict[str, int] = {}
        self._next_jobid = 1
        self._ctx: Any = ffi.NULL
        self.last_outcome: MatchOutcome | None = None
        self.last_error = ""
        self.matches = 0
        """Jobspecs sent to ``match_with_jobid``, fitting or not (pool leases included)."""
        self.match_seconds = 0.0
        """Fluxion's own timer over them (the ``ov`` each match reports): the time spent in
        its traversal, apart from this module's JSON and cffi round trips."""
        self._load()

    # -- life cycle -------------------------------------------------------------

    def _load(self) -> None:
        """(Re)create the context from the graph and re-hold every known allocation."""
        if self._ctx != ffi.NULL:
            self.lib.api.reapi_cli_destroy(self._ctx)
        jgf = self.graph.to_jgf(numa=self.numa, devices=False)
        check_jgf(jgf)
        ensure_types(
            self.lib,
            {v["metadata"]["type"] for v in jgf["graph"]["nodes"]}
            | {level.type for level in self.graph.levels},
        )
        self._virtual_by_path = {v.path: v for v in self.graph.virtual}
        self._node_at = {self.graph.node_path(n.name): n.name for n in self.graph.nodes}
        self._vertex_by_path = {
            v["metadata"]["paths"]["containment"]: v for v in jgf["graph"]["nodes"]
        }
        self._zoned = [n.name for n in self.graph.nodes if n.zones_loaded(self.numa)]
        self._ctx = self.lib.api.reapi_cli_new()
        if self._ctx == ffi.NULL:
            raise MatcherError("reapi_cli_new failed")
        options = json.dumps(
            {"load_format": "jgf", "matcher_policy": self.policy.value, "match_format": "jgf"}
        )
        rc = self.lib.api.reapi_cli_initialize(
            self._ctx, json.dumps(jgf).encode(), options.encode()
        )
        if rc != 0:
            raise MatcherError(
                f"Fluxion refused the graph: {self._error() or f'errno {ffi.errno}'}"
            )
        for node in self.graph.nodes:
            if node.down:
                self._set_status(node.name, down=True)
        held, self._jobs, self._holder = self._jobs, {}, {}
        for allocation in held.values():
            self.restore(allocation)

    def __del__(self) -> None:
        ctx = getattr(self, "_ctx", ffi.NULL)
        destroy = getattr(self, "_destroy", None)
        if ctx != ffi.NULL and destroy is not None:
            destroy(ctx)
            self._ctx = ffi.NULL

    def _error(self) -> str:
        text = self.lib.take_string(self.lib.api.reapi_cli_get_err_msg(self._ctx))
        self.lib.api.reapi_cli_clear_err_msg(self._ctx)
        return text.strip()

    # -- the Matcher protocol ---------------------------------------------------

    def match_allocate(self, jobspec: Mapping[str, Any]) -> Allocation | None:
        jobid = self._next_jobid
        self._next_jobid += 1
        reserved = ffi.new("bool *")
        r_out = ffi.new("char **")
        at = ffi.new("int64_t *")
        overhead = ffi.new("double *")
        ffi.errno = 0
        jobspec = one_zone_jobspec(jobspec, self._zoned)
        rc = self.lib.api.reapi_cli_match_with_jobid(
            self._ctx, self.lib.api.MATCH_ALLOCATE_W_SATISFIABILITY, json.dumps(jobspec).encode(),
            jobid, reserved, r_out, at, overhead,
        )
        code = ffi.errno
        self.matches += 1
        self.match_seconds += overhead[0]
        text = self.lib.take_string(r_out[0])
        if rc != 0:
            message = self._error()
            outcome = _ERRNO_OUTCOME.get(code)
            if outcome is MatchOutcome.UNSATISFIABLE and self.satisfiable(jobspec):
                outcome = MatchOutcome.BUSY
            if outcome is None:
                raise MatcherError(
                    f"Fluxion failed to match "
                    f"(errno {code} {errno.errorcode.get(code, '?')}): {message}"
                )
            self.last_outcome = outcome
            self.last_error = message
            if message:
                logger.debug("Fluxion: %s", message)
            return None
        self.last_outcome = None
        allocation = self._read(jobid, json.loads(text))
        self._remember(allocation)
        return allocation

    def satisfiable(self, jobspec: Mapping[str, Any]) -> bool:
        sat = ffi.new("bool *")
        overhead = ffi.new("double *")
        ffi.errno = 0
        rc = self.lib.api.reapi_cli_match_satisfy(
            self._ctx, json.dumps(one_zone_jobspec(jobspec, self._zoned)).encode(), sat, overhead
        )
        code = ffi.errno
        if rc != 0 and code not in (errno.ENODEV, errno.EBUSY, 0):
            raise MatcherError(
                f"Fluxion satisfiability check failed (errno {code}): {self._error()}"
            )
        self._error()
        return rc == 0 and bool(sat[0])

    def cancel(self, jobid: int) -> bool:
        if jobid not in self._jobs:
            return False
        rc = self.lib.api.reapi_cli_cancel(self._ctx, jobid, False)
        if rc != 0:
            logger.error("Fluxion could not cancel job %d: %s", jobid, self._error())
            return False
        for path in self._held_paths(self._jobs.pop(jobid)):
            self._holder.pop(path, None)
        return True

    def restore(self, allocation: Allocation) -> None:
        if allocation.jobid in self._jobs:
            raise MatcherError(f"job {allocation.jobid} is already held")
        try:
            paths = self._held_paths(allocation)
        except KeyError as unknown:  # a record of a node this graph does not hold (any more)
            raise MatcherError(f"cannot restore job {allocation.jobid}: node {unknown} is not "
                               "in the graph") from None
        overlap = sorted(p for p in paths if p in self._holder)
        if overlap:
            raise MatcherError(
                f"cannot restore job {allocation.jobid}: {overlap[0]} is already held by job "
                f"{self._holder[overlap[0]]}"
            )
        subgraph = self._allocation_jgf(allocation)
        at = ffi.new("int64_t *")
        overhead = ffi.new("double *")
        r_out = ffi.new("const char **")
        rc = self.lib.api.reapi_cli_update_allocate(
            self._ctx, allocation.jobid, json.dumps(subgraph).encode(), at, overhead, r_out
        )
        if r_out[0] != ffi.NULL:
            self.lib.take_string(ffi.cast("char *", r_out[0]))
        if rc != 0:
            raise MatcherError(
                f"cannot restore job {allocation.jobid}: {self._error() or 'refused by Fluxion'}"
            )
        self._remember(allocation)
        self._next_jobid = max(self._next_jobid, allocation.jobid + 1)

    def add_node(self, node: NodeInfo) -> None:
        if self.graph.add_node(node) is not None:
            self._load()

    def remove_node(self, name: str) -> None:
        """Take the node out; held allocations keep their other shares."""
        self.graph.remove_node(name)
        self._jobs = {
            jobid: Allocation(jobid, tuple(s for s in a.nodes if s.node != name), a.virtual)
            for jobid, a in self._jobs.items()
        }
        self._load()

    def set_node_down(self, name: str, down: bool = True) -> None:
        self.graph.set_down(name, down)
        self._set_status(name, down=down)

    def allocations(self) -> Mapping[int, Allocation]:
        return dict(self._jobs)

    # -- reservations -----------------------------------------------------------------------

    def plan_reservation(
        self, holds: Sequence[Mapping[str, Any]], wanted: Sequence[Mapping[str, Any]]
    ) -> tuple[int, list[Allocation]] | None:
        """:class:`fluence_core.api.ReservationPlanner`, by Fluxion's own rule: a scratch
        context of the same graph, each hold allocated for its duration, then each wanted
        jobspec matched with ``MATCH_ALLOCATE_ORELSE_RESERVE``.

        A scratch context because ``reapi_cli`` matches at time 0 and this matcher holds
        every allocation for as long as it lasts (duration 0): only a context whose holds
        carry the time they still have left can say when room frees."""
        scratch = FluxionMatcher(self.graph, self.policy, self.lib, numa=self.numa)
        latest = 0
        found = []
        for hold in holds:
            if scratch._reserve_or_allocate(hold, reserve=False) is None:
                logger.debug("Fluxion: a hold does not fit its own room: %s",
                             scratch.last_error)
                return None
        for jobspec in wanted:
            placed = scratch._reserve_or_allocate(jobspec, reserve=True)
            if placed is None:
                return None
            at, allocation = placed
            latest = max(latest, at)
            found.append(allocation)
        return latest, found

    def _reserve_or_allocate(self, jobspec: Mapping[str, Any], *, reserve: bool
                             ) -> tuple[int, Allocation] | None:
        """Allocate ``jobspec`` now, or (``reserve``) at the earliest time it fits."""
        jobid = self._next_jobid
        self._next_jobid += 1
        reserved = ffi.new("bool *")
        r_out = ffi.new("char **")
        at = ffi.new("int64_t *")
        overhead = ffi.new("double *")
        op = self.lib.api.MATCH_ALLOCATE_ORELSE_RESERVE if reserve else self.lib.api.MATCH_ALLOCATE
        ffi.errno = 0
        rc = self.lib.api.reapi_cli_match_with_jobid(
            self._ctx, op, json.dumps(one_zone_jobspec(jobspec, self._zoned)).encode(), jobid,
            reserved, r_out, at, overhead,
        )
        text = self.lib.take_string(r_out[0])
        if rc != 0:
            self.last_error = self._error()
            return None
        return int(at[0]), self._read(jobid, json.loads(text))

    def _remember(self, allocation: Allocation) -> None:
        self._jobs[allocation.jobid] = allocation
        for path in self._held_paths(allocation):
            self._holder[path] = allocation.jobid

    def _set_status(self, name: str, *, down: bool) -> None:
        status = self.lib.api.RESOURCE_DOWN if down else self.lib.api.RESOURCE_UP
        path = self.graph.node_path(name)
        if self.lib.api.reapi_cli_set_status(self._ctx, path.encode(), status) != 0:
            raise MatcherError(
                f"Fluxion could not mark {name} {'down' if down else 'up'}: {self._error()}"
            )

    # -- reading and writing allocations ------------------------------------------

    def _read(self, jobid: int, r: Mapping[str, Any]) -> Allocation:
        """Turn Fluxion's JGF allocation into the matcher-neutral record."""
        graph = r.get("graph", r)
        per_node: dict[str, dict[str, list[int]]] = {}
        chunk_mib: dict[str, int] = {}
        virtual_paths: list[str] = []
        for vertex in graph.get("nodes", []):
            meta = vertex["metadata"]
            path = meta["paths"]["containment"]
            vtype = meta["type"]
            if vtype == "node":
                if path in self._virtual_by_path:
                    virtual_paths.append(path)
                continue
            if vtype not in ("core", "gpu", "memory"):
                continue
            node = _owning_node(path, self._node_at)
            entry = per_node.setdefault(node, {"core": [], "gpu": [], "memory": []})
            entry[vtype].append(int(meta["id"]))
            if vtype == "memory":
                chunk_mib[node] = int(meta.get("size", 0))
        held = set(virtual_paths)
        outermost = [p for p in virtual_paths if p.rsplit("/", 1)[0] not in held]
        nodes = tuple(
            NodeShare(
                node=node,
                cores=tuple(sorted(entry["core"])),
                gpus=tuple(sorted(entry["gpu"])),
                memory=tuple(sorted(entry["memory"])),
                memory_mib=len(entry["memory"]) * chunk_mib.get(node, 0),
            )
            for node, entry in per_node.items()
        )
        virtual = tuple(
            VirtualShare(
                path=path,
                type=v.type,
                name=v.name,
                backend=v.backend,
                attributes=dict(v.attributes),
            )
            for path in outermost
            for v in [self._virtual_by_path[path]]
        )
        return Allocation(jobid=jobid, nodes=nodes, virtual=virtual)

    def _held_paths(self, allocation: Allocation) -> set[str]:
        """The containment paths of the vertices an allocation holds exclusively."""
        held: set[str] = set()
        for share in allocation.nodes:
            node, numa = share.node, self.numa
            path = self.graph.vertex_path
            held.update(path(node, "core", i, numa=numa) for i in share.cores)
            held.update(path(node, "gpu", i, numa=numa) for i in share.gpus)
            held.update(path(node, "memory", i, numa=numa) for i in share.memory)
        held.update(share.path for share in allocation.virtual)
        return held

    def _allocation_jgf(self, allocation: Allocation) -> dict[str, Any]:
        """The allocation as Fluxion writes one: held vertices marked exclusive, with
        their ancestors, so that ``update_allocate`` re-holds exactly them."""
        by_path = self._vertex_by_path
        held = self._held_paths(allocation)
        wanted = set(held)
        for path in held:
            parts = path.split("/")
            wanted.update("/".join(parts[:i]) for i in range(2, len(parts)))
        missing = sorted(p for p in wanted if p not in by_path)
        if missing:
            raise MatcherError(
                f"cannot restore job {allocation.jobid}: unknown vertices {missing[:3]}"
            )
        vertices = []
        for path in sorted(wanted):
            vertex = by_path[path]
            vertices.append(
                {"id": vertex["id"], "metadata": {**vertex["metadata"], "exclusive": path in held}}
            )
        edges = [
            {"source": by_path[path.rsplit("/", 1)[0]]["id"], "target": by_path[path]["id"]}
            for path in sorted(wanted)
            if path != self.graph.domain_path(())
        ]
        return {"graph": {"nodes": vertices, "edges": edges}}


def _owning_node(path: str, node_at: Mapping[str, str]) -> str:
    """The node whose vertex contains the vertex at ``path``: the nearest ancestor path that
    is a node's (paths have no fixed depth: topology levels above, sockets below)."""
    parent = path
    while "/" in parent:
        parent = parent.rsplit("/", 1)[0]
        if parent in node_at:
            return node_at[parent]
    raise MatcherError(f"Fluxion allocated {path}, which is under no known node")
