"""The embedded matcher as a plugin: the ``trylast`` default for ``fluence_matcher``."""

from __future__ import annotations

from fluence_core import hookimpl
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.base import Matcher
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.settings import Settings


@hookimpl(trylast=True)
def fluence_matcher(settings: Settings, graph: ResourceGraph) -> Matcher:
    return EmbeddedMatcher(graph, settings.graph.match_policy)
