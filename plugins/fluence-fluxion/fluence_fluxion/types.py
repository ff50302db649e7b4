"""The vertex types Fluxion can load in this process, primed once before the first graph.

flux-sched interns resource type names in one process-wide table and closes it at
the end of every ``reapi_cli_initialize`` (``resource_type_t::storage_t::finalize``
in ``reapi_cli_impl.hpp``); nothing in the C API opens it again. So the first graph
a process loads fixes every vertex type any later graph or jobspec may name: a
second graph with a new topology level type (a config reload adding ``zone``, a
second matcher) would be refused with "This interner is finalized".

Before the first real graph, :func:`ensure_types` loads a throwaway primer graph
holding one vertex of every type Fluence may emit: the graph's fixed types
(:data:`fluence_core.topology.RESERVED_TYPES`), the common level types of
:data:`LEVEL_VOCABULARY`, and the level types configured then. A later graph that
needs a type the process never interned gets a :class:`MatcherError` naming it and
saying a restart is needed, logged as an error.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Iterable

from fluence_core.api import RESERVED_TYPES, MatcherError, logger

from fluence_fluxion.binding import Library, ffi

LEVEL_VOCABULARY = frozenset({
    "region", "zone", "datacenter", "building", "room", "hall", "row", "pod", "block",
    "rack", "chassis", "switch", "spine", "leaf", "subnet", "superpod", "island", "cell",
    "partition", "nvlink", "host-group",
})
"""Level types interned in every process whatever is configured at its first load, so a
config reload may add any of them without a restart."""

_lock = threading.Lock()
_interned: dict[str, frozenset[str]] = {}
"""Per loaded library file: the types its interner holds, once primed."""


def interned(library: Library) -> frozenset[str] | None:
    """The types the library's interner holds, or None before this process primed it."""
    with _lock:
        return _interned.get(_key(library))


def ensure_types(library: Library, types: Iterable[str]) -> None:
    """Make sure Fluxion can load a graph (and match jobspecs) naming ``types``.

    The first call in a process loads the primer graph; later calls only check.
    """
    wanted = frozenset(types)
    with _lock:
        key = _key(library)
        known = _interned.get(key)
        if known is None:
            known = RESERVED_TYPES | LEVEL_VOCABULARY | wanted
            _prime(library, known)
            _interned[key] = known
            logger.debug("Fluxion vertex types interned for this process: %s",
                         ", ".join(sorted(known)))
    missing = sorted(wanted - known)
    if missing:
        message = (
            f"Fluxion cannot load vertex type{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(t) for t in missing)}: flux-sched fixes the vertex types a process "
            "may use at its first graph load, and this process started without "
            f"{'them' if len(missing) > 1 else 'it'}; restart Fluence to use "
            f"{'them' if len(missing) > 1 else 'it'} (the topology levels configured at start "
            f"and {', '.join(sorted(LEVEL_VOCABULARY))} are always available)"
        )
        logger.error("%s", message)
        raise MatcherError(message)


def primer_jgf(types: Iterable[str]) -> dict[str, Any]:
    """A graph of one cluster vertex with one child vertex of each other type."""
    vertices = [_vertex(0, "cluster", "/cluster0")]
    edges = []
    for uniq, vtype in enumerate(sorted(set(types) - {"cluster"}), start=1):
        vertices.append(_vertex(uniq, vtype, f"/cluster0/{vtype}0"))
        edges.append({"source": "0", "target": str(uniq),
                      "metadata": {"name": {"containment": "contains"}}})
    return {"graph": {"nodes": vertices, "edges": edges}}


def _vertex(uniq: int, vtype: str, path: str) -> dict[str, Any]:
    return {"id": str(uniq), "metadata": {
        "type": vtype, "basename": vtype, "name": f"{vtype}0", "id": 0, "uniq_id": uniq,
        "rank": -1, "exclusive": False, "unit": "", "size": 1,
        "paths": {"containment": path},
    }}


def _prime(library: Library, types: frozenset[str]) -> None:
    ctx = library.api.reapi_cli_new()
    if ctx == ffi.NULL:
        raise MatcherError("reapi_cli_new failed")
    try:
        options = json.dumps({"load_format": "jgf", "match_format": "jgf"})
        rc = library.api.reapi_cli_initialize(
            ctx, json.dumps(primer_jgf(types)).encode(), options.encode()
        )
        if rc != 0:
            text = library.take_string(library.api.reapi_cli_get_err_msg(ctx)).strip()
            raise MatcherError(
                "Fluxion refused the graph that fixes its vertex types (did something else in "
                f"this process load a graph first?): {text or f'errno {ffi.errno}'}"
            )
    finally:
        library.api.reapi_cli_destroy(ctx)


def _key(library: Library) -> str:
    """One interner per library file: ``dlopen`` of one file shares its statics."""
    return str(library.path.resolve())
