"""Matchers available in this environment, for the shared conformance suite."""

from __future__ import annotations

import os
from typing import Callable

import pytest

from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import Matcher
from fluence_core.matcher.embedded import EmbeddedMatcher


def _embedded(graph: ResourceGraph, policy: str) -> Matcher:
    return EmbeddedMatcher(graph, policy)


def _fluxion_factory() -> Callable[[ResourceGraph, str], Matcher] | str:
    """The Fluxion matcher, or why it cannot be used here."""
    library = os.environ.get("FLUENCE_FLUXION_LIB")
    if not library:
        return "FLUENCE_FLUXION_LIB is not set (path to flux-sched's libreapi_cli.so)"
    try:
        from fluence_fluxion.matcher import FluxionMatcher, load_library
    except ImportError:
        return "the fluence-fluxion plugin is not installed"
    try:
        lib = load_library(library)
    except OSError as error:
        return f"cannot load {library}: {error}"
    return lambda graph, policy: FluxionMatcher(graph, policy, lib)


@pytest.fixture(params=["embedded", "fluxion"])
def matcher_factory(request: pytest.FixtureRequest) -> Callable[[ResourceGraph, str], Matcher]:
    if request.param == "embedded":
        return _embedded
    factory = _fluxion_factory()
    if isinstance(factory, str):
        pytest.skip(f"Fluxion matcher unavailable: {factory}")
    return factory
