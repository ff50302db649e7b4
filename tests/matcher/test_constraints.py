"""RFC 31 constraints as the embedded matcher evaluates them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluence_core.errors import MatcherError
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.constraints import (
    compile_constraint, expand_hostlist, expand_hostlists, expand_idset,
)
from fluence_core.models import NodeInfo
from fluence_core.resource_config import load_resource_config

PROPS = frozenset({"virtual=false", "zone=a"})


def test_properties_match_on_the_key_and_caret_negates() -> None:
    assert compile_constraint({"properties": ["virtual=false"]})("n0", PROPS, 0)
    assert not compile_constraint({"properties": ["virtual=true"]})("n0", PROPS, 0)
    assert not compile_constraint({"properties": ["^zone=a"]})("n0", PROPS, 0)
    assert compile_constraint({"properties": ["^zone=b"]})("n0", PROPS, 0)


def test_hostlist_ranks_and_boolean_operators_combine() -> None:
    constraint = {"and": [{"properties": ["virtual=false"]}, {"not": [{"hostlist": ["n[0-1]"]}]}]}
    predicate = compile_constraint(constraint)
    assert not predicate("n1", PROPS, 1)
    assert predicate("n2", PROPS, 2)
    either = compile_constraint({"or": [{"ranks": ["0-1"]}, {"hostlist": ["login"]}]})
    assert either("x", PROPS, 1) and either("login", PROPS, 9) and not either("x", PROPS, 5)


def test_hostlist_and_idset_expand_ranges_with_padding() -> None:
    assert expand_hostlist("node[01-03,7],login") == [
        "node01",
        "node02",
        "node03",
        "node7",
        "login",
    ]
    assert list(expand_idset("0-2,5")) == [0, 1, 2, 5]


@pytest.mark.parametrize("bad", [{"propertiez": ["x"]}, {"properties": "x"}, {"and": {"x": 1}}])
def test_malformed_constraints_are_refused_with_a_reason(bad: dict[str, object]) -> None:
    with pytest.raises(MatcherError):
        compile_constraint(bad)


def test_a_plain_host_name_expands_to_itself() -> None:
    assert expand_hostlist("n1") == ["n1"] and expand_hostlist(" n1 ") == ["n1"]
    assert expand_hostlist("") == [] and expand_hostlist("a,b") == ["a", "b"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(
    st.sampled_from(["node-1", "n[1-3]", "a,b", " padded ", "", "x[01-02]y", "login"]),
    st.text(alphabet="ab-,0 \t", max_size=6))))
def test_a_list_of_hostlists_expands_as_each_of_them_does(items: list[str]) -> None:
    assert expand_hostlists(items) == [h for item in items for h in expand_hostlist(item)]


def test_the_graph_orders_the_names_it_knows_by_rank() -> None:
    graph = ResourceGraph([NodeInfo(name=n, cores=1, memory_mib=1024) for n in ("c", "a", "b")],
                          load_resource_config(None))
    assert graph.in_rank_order({"b", "zz", "c", "a"}) == ["c", "a", "b"]
