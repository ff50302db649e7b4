"""fluence_core.hookspecs: every hook documented, tested by name, and behaving as declared.

Each hook test registers a tiny in-process plugin next to the built-ins (other
installed plugins are blocked so the result is ours alone) and checks the hook
is called with its arguments and that its result semantics hold: *firstresult*
hooks stop at the first non-``None`` answer, the others collect every answer.
"""

from __future__ import annotations

import ast
import inspect
import typing
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Mapping, Sequence

import pytest
import typer
from pydantic_settings import SettingsConfigDict
from typer.testing import CliRunner

import fluence_core
from fluence_core import hookimpl, hookspecs
from fluence_core.fake_cluster import FakeCluster
from fluence_core.graph import ResourceGraph
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.models import Group, PodRequest
from fluence_core.matcher.readback import PodPlacement
from fluence_core.runtime.provider import Provider
from fluence_core.plugins import FluencePluginManager, get_plugin_manager
from fluence_core.scheduler.context import SchedulingContext
from fluence_core.settings import PluginSettings, Settings
from fluence_core.webhook.base import AdmissionContext, Handler

pytestmark = pytest.mark.usefixtures("clean_env")

TESTS = Path(__file__).resolve().parent
HOOK_NAMES = sorted(name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
                    if name.startswith("fluence_"))


def manager_with(*plugins: object, keep: Sequence[str] = ()) -> FluencePluginManager:
    """The built-ins in ``keep`` plus ``plugins`` (registered in order p0, p1, ...)."""
    installed = [ep.name for ep in entry_points(group="fluence") if ep.name not in keep]
    return get_plugin_manager(
        Settings(disable_plugins=installed),
        extra_plugins=[(f"p{i}", plugin) for i, plugin in enumerate(plugins)],
    )


GROUP = Group("g", (PodRequest("a", cores=2),))
PLACEMENTS = {"default/a": PodPlacement("default/a", node="n0")}
_EMPTY = ResourceGraph()
CTX = SchedulingContext(settings=Settings(), graph=_EMPTY, matcher=EmbeddedMatcher(_EMPTY),
                        cluster=FakeCluster())
ADMISSION_CTX = AdmissionContext(settings=Settings(), cluster=None, namespace="default")


# -- the two meta-tests ---------------------------------------------------------


def test_every_hook_has_a_docstring() -> None:
    undocumented = [
        name for name in HOOK_NAMES if not (getattr(hookspecs, name).__doc__ or "").strip()
    ]
    assert not undocumented


def test_every_hook_has_a_test_named_after_it() -> None:
    test_names: set[str] = set()
    for path in TESTS.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith(
                "test_"
            ):
                test_names.add(node.name)
    untested = [hook for hook in HOOK_NAMES if not any(hook in test for test in test_names)]
    assert not untested


def test_there_are_hooks_to_check() -> None:
    assert {"fluence_matcher", "fluence_prefilter", "fluence_filter", "fluence_postfilter",
            "fluence_reserve", "fluence_unreserve", "fluence_prebind", "fluence_webhook_handlers",
            "fluence_admit", "fluence_providers"} <= set(HOOK_NAMES)


def test_every_hook_is_typed() -> None:
    for name in HOOK_NAMES:
        signature = inspect.signature(getattr(hookspecs, name))
        assert signature.return_annotation is not inspect.Signature.empty, name
        assert all(
            p.annotation is not inspect.Parameter.empty for p in signature.parameters.values()
        ), name


def type_checking_namespace() -> dict[str, object]:
    """hookspecs' globals plus what its ``if TYPE_CHECKING:`` block imports, so every
    annotation resolves to the real types."""
    namespace = dict(vars(hookspecs))
    tree = ast.parse(inspect.getsource(hookspecs))
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            exec(compile(ast.Module(node.body, []), "hookspecs-type-checking", "exec"), namespace)
    return namespace


def mentions_any(annotation: object) -> bool:
    """Whether ``Any`` appears anywhere in a resolved annotation (``Sequence[Any]`` too)."""
    if annotation is Any:
        return True
    return any(mentions_any(arg) for arg in typing.get_args(annotation))


def hook_hints(name: str) -> dict[str, object]:
    return typing.get_type_hints(getattr(hookspecs, name), globalns=type_checking_namespace())


def test_mentions_any_finds_any_nested_in_a_type() -> None:
    assert mentions_any(Sequence[Any] | None) and mentions_any(Mapping[str, Any])
    assert not mentions_any(Mapping[str, object]) and not mentions_any(Sequence[Handler] | None)


def test_no_hook_signature_mentions_any() -> None:
    loose = {name: [part for part, hint in hook_hints(name).items() if mentions_any(hint)]
             for name in HOOK_NAMES}
    assert not {name: parts for name, parts in loose.items() if parts}


def test_contribution_hooks_return_the_protocols() -> None:
    assert Handler in typing.get_args(
        typing.get_args(hook_hints("fluence_webhook_handlers")["return"])[0]
    )
    assert Provider in typing.get_args(
        typing.get_args(hook_hints("fluence_providers")["return"])[0]
    )


def test_every_context_a_hook_receives_is_a_typed_object() -> None:
    contexts = {name: hook_hints(name)["ctx"] for name in HOOK_NAMES if "ctx" in hook_hints(name)}
    assert contexts.pop("fluence_admit") is AdmissionContext
    assert contexts and set(contexts.values()) == {SchedulingContext}


def test_hookimpl_is_exported_from_the_package_root_for_the_fluence_project() -> None:
    assert fluence_core.hookimpl.project_name == "fluence"
    assert hookspecs.hookspec.project_name == "fluence"


# -- fluence_matcher ------------------------------------------------------------


def test_fluence_matcher_defaults_to_the_embedded_matcher(small_graph: ResourceGraph) -> None:
    manager = manager_with(keep=["embedded-matcher"])
    settings = Settings()
    assert isinstance(
        manager.hook.fluence_matcher(settings=settings, graph=small_graph), EmbeddedMatcher
    )


def test_fluence_matcher_a_plugin_answer_wins_over_the_trylast_default(
    small_graph: ResourceGraph,
) -> None:
    sentinel = object()

    class Mine:
        @hookimpl
        def fluence_matcher(self, settings: Settings, graph: ResourceGraph) -> object:
            assert graph is small_graph
            return sentinel

    manager = manager_with(Mine(), keep=["embedded-matcher"])
    assert manager.hook.fluence_matcher(settings=Settings(), graph=small_graph) is sentinel


def test_fluence_matcher_a_plugin_that_cannot_serve_returns_none_and_the_next_is_asked(
    small_graph: ResourceGraph,
) -> None:
    class Unavailable:
        called = False

        @hookimpl
        def fluence_matcher(self, settings: Settings, graph: ResourceGraph) -> None:
            Unavailable.called = True
            return None

    manager = manager_with(Unavailable(), keep=["embedded-matcher"])
    assert isinstance(
        manager.hook.fluence_matcher(settings=Settings(), graph=small_graph), EmbeddedMatcher
    )
    assert Unavailable.called


def test_fluence_matcher_is_none_when_no_plugin_serves(small_graph: ResourceGraph) -> None:
    assert manager_with().hook.fluence_matcher(settings=Settings(), graph=small_graph) is None


# -- veto hooks (firstresult) ---------------------------------------------------


def test_fluence_prefilter_lets_a_group_through_when_nobody_objects() -> None:
    class Quiet:
        seen: list[Group] = []

        @hookimpl
        def fluence_prefilter(self, group: Group, ctx: SchedulingContext) -> None:
            Quiet.seen.append(group)

    assert manager_with(Quiet()).hook.fluence_prefilter(group=GROUP, ctx=CTX) is None
    assert Quiet.seen == [GROUP]


def test_fluence_prefilter_stops_at_the_first_reason() -> None:
    class Veto:
        @hookimpl
        def fluence_prefilter(self, group: Group, ctx: SchedulingContext) -> str:
            return "quota exceeded"

    class Later:
        called = False

        @hookimpl(tryfirst=False, trylast=True)
        def fluence_prefilter(self, group: Group, ctx: SchedulingContext) -> str:
            Later.called = True
            return "never seen"

    assert (
        manager_with(Later(), Veto()).hook.fluence_prefilter(group=GROUP, ctx=CTX)
        == "quota exceeded"
    )
    assert not Later.called


def test_fluence_filter_receives_pod_and_node_and_returns_a_reason() -> None:
    class NoNode3:
        @hookimpl
        def fluence_filter(self, pod: PodRequest, node: str, ctx: SchedulingContext) -> str | None:
            return f"{pod.name} may not run on {node}" if node == "n3" else None

    hook = manager_with(NoNode3()).hook
    assert hook.fluence_filter(pod=GROUP.pods[0], node="n0", ctx=CTX) is None
    assert hook.fluence_filter(pod=GROUP.pods[0], node="n3", ctx=CTX) == "a may not run on n3"


def test_fluence_postfilter_an_empty_list_is_an_answer_meaning_rematch_as_is() -> None:
    class Rematch:
        @hookimpl
        def fluence_postfilter(
            self, group: Group, reason: str, ctx: SchedulingContext
        ) -> list[str]:
            return []

    class Exclude:
        @hookimpl(trylast=True)
        def fluence_postfilter(
            self, group: Group, reason: str, ctx: SchedulingContext
        ) -> list[str]:
            return ["n1"]

    result = manager_with(Exclude(), Rematch()).hook.fluence_postfilter(
        group=GROUP, reason="busy", ctx=CTX
    )
    assert result == []


def test_fluence_postfilter_none_from_everyone_means_back_off() -> None:
    class Pass:
        @hookimpl
        def fluence_postfilter(self, group: Group, reason: str, ctx: SchedulingContext) -> None:
            return None

    assert manager_with(Pass()).hook.fluence_postfilter(group=GROUP, reason="busy", ctx=CTX) is None


def test_fluence_admit_stops_at_the_first_refusal() -> None:
    class Admit:
        @hookimpl
        def fluence_admit(self, pod: Mapping[str, Any], ctx: Mapping[str, Any]) -> None:
            return None

    class Refuse:
        @hookimpl
        def fluence_admit(self, pod: Mapping[str, Any], ctx: Mapping[str, Any]) -> str:
            return f"{pod['metadata']['name']}: the group asks for more cores than the cluster has"

    pod = {"metadata": {"name": "big"}}
    assert manager_with(Admit()).hook.fluence_admit(pod=pod, ctx=ADMISSION_CTX) is None
    assert (
        manager_with(Admit(), Refuse())
        .hook.fluence_admit(pod=pod, ctx=ADMISSION_CTX)
        .startswith("big: ")
    )


# -- hooks where every implementation runs --------------------------------------


def test_fluence_reserve_runs_every_implementation() -> None:
    seen: list[str] = []

    def stamper(label: str) -> object:
        class Stamp:
            @hookimpl
            def fluence_reserve(self, group: Group, placements: Mapping[str, PodPlacement],
                                ctx: SchedulingContext) -> None:
                seen.append(f"{label}:{placements['default/a'].node}")
        return Stamp()

    manager_with(stamper("x"), stamper("y")).hook.fluence_reserve(
        group=GROUP, placements=PLACEMENTS, ctx=CTX
    )
    assert sorted(seen) == ["x:n0", "y:n0"]


def test_fluence_reserve_raising_propagates_to_the_caller() -> None:
    class Fails:
        @hookimpl
        def fluence_reserve(self, group: Group, placements: Mapping[str, PodPlacement],
                            ctx: SchedulingContext) -> None:
            raise RuntimeError("cannot stamp")

    with pytest.raises(RuntimeError, match="cannot stamp"):
        manager_with(Fails()).hook.fluence_reserve(group=GROUP, placements=PLACEMENTS, ctx=CTX)


def test_fluence_unreserve_runs_every_implementation() -> None:
    seen: list[str] = []

    def rollback(label: str) -> object:
        class Rollback:
            @hookimpl
            def fluence_unreserve(self, group: Group, placements: Mapping[str, PodPlacement],
                                  ctx: SchedulingContext) -> None:
                seen.append(label)
        return Rollback()

    manager_with(rollback("x"), rollback("y")).hook.fluence_unreserve(
        group=GROUP, placements=PLACEMENTS, ctx=CTX
    )
    assert sorted(seen) == ["x", "y"]


def test_fluence_prebind_collects_every_plugins_annotations() -> None:
    def annotate(key: str) -> object:
        class Annotate:
            @hookimpl
            def fluence_prebind(self, group: Group, placements: Mapping[str, PodPlacement],
                                ctx: SchedulingContext) -> Mapping[str, str]:
                return {key: group.name}
        return Annotate()

    class Nothing:
        @hookimpl
        def fluence_prebind(self, group: Group, placements: Mapping[str, PodPlacement],
                            ctx: SchedulingContext) -> None:
            return None

    results = manager_with(annotate("a"), Nothing(), annotate("b")).hook.fluence_prebind(
        group=GROUP, placements=PLACEMENTS, ctx=CTX
    )
    assert sorted(results, key=lambda r: sorted(r)) == [{"a": "g"}, {"b": "g"}]


def test_fluence_webhook_handlers_collects_every_plugins_handlers() -> None:
    class Handler:
        def __init__(self, name: str) -> None:
            self.name = name

    def contribute(*handler_names: str) -> object:
        class Contribute:
            @hookimpl
            def fluence_webhook_handlers(self, settings: Settings) -> list[Handler]:
                return [Handler(n) for n in handler_names]
        return Contribute()

    lists = manager_with(
        contribute("gang"), contribute("quantum", "env")
    ).hook.fluence_webhook_handlers(settings=Settings())
    assert sorted(h.name for handlers in lists for h in handlers) == ["env", "gang", "quantum"]


def test_fluence_feasibility_filters_collects_every_plugins_filters_in_kube_order() -> None:
    from fluence_core.feasibility.node_ports import NodePorts
    from fluence_core.scheduler.feasible import filters_of

    class Mine:
        name = "Mine"

        def prepare(self, pod: Any, snapshot: Any) -> None:
            return None

    class Contribute:
        @hookimpl
        def fluence_feasibility_filters(self, settings: Settings) -> list[Any]:
            return [Mine()]

    manager = manager_with(Contribute(), keep=["filter-node-ports", "filter-node-name"])
    lists = manager.hook.fluence_feasibility_filters(settings=Settings())
    assert [f.name for f in filters_of(lists)] == ["NodeName", "NodePorts", "Mine"]
    assert any(isinstance(f, NodePorts) for f in filters_of(lists))


def test_fluence_score_plugins_collects_every_plugins_scores_and_each_can_be_disabled() -> None:
    class Mine:
        name = "Mine"
        weight = 1

        def score(self, pod: Any, snapshot: Any, nodes: Any) -> None:
            return None

    class Contribute:
        @hookimpl
        def fluence_score_plugins(self, settings: Settings) -> list[Any]:
            return [Mine()]

    manager = manager_with(Contribute(), keep=["score-node-affinity", "score-taint-toleration"])
    lists = manager.hook.fluence_score_plugins(settings=Settings())
    assert sorted(s.name for found in lists for s in found) == [
        "Mine", "NodeAffinity", "TaintToleration"]
    every = manager_with(keep=[ep.name for ep in entry_points(group="fluence")
                               if ep.name.startswith("score-")])
    found = every.hook.fluence_score_plugins(settings=Settings())
    assert sorted((s.name, s.weight) for scores in found for s in scores) == [
        ("InterPodAffinity", 2), ("NodeAffinity", 2), ("PodTopologySpread", 2),
        ("TaintToleration", 3)]


def test_fluence_providers_collects_every_plugins_providers() -> None:
    def contribute(name: str) -> object:
        class Contribute:
            @hookimpl
            def fluence_providers(self) -> list[str]:
                return [name]
        return Contribute()

    lists = manager_with(contribute("braket"), contribute("qrmi")).hook.fluence_providers()
    assert sorted(p for providers in lists for p in providers) == ["braket", "qrmi"]


def test_fluence_cli_lets_a_plugin_add_a_command() -> None:
    class Command:
        @hookimpl
        def fluence_cli(self, app: typer.Typer) -> None:
            @app.command("hello")
            def hello(name: str = "world") -> None:
                typer.echo(f"hello {name}")

    app = typer.Typer()

    @app.command("core")
    def core() -> None:
        """A stand-in for the core commands."""

    manager_with(Command()).hook.fluence_cli(app=app)
    result = CliRunner().invoke(app, ["hello", "--name", "fluence"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "hello fluence\n"


def test_fluence_settings_collects_every_plugins_settings_classes() -> None:
    def contribute(prefix: str) -> object:
        class Own(PluginSettings):
            model_config = SettingsConfigDict(env_prefix=prefix)

        class Contribute:
            @hookimpl
            def fluence_settings(self) -> list[type[PluginSettings]]:
                return [Own]
        return Contribute()

    lists = manager_with(contribute("FLUENCE_A_"), contribute("FLUENCE_B_")).hook.fluence_settings()
    assert sorted(cls.model_config["env_prefix"] for classes in lists for cls in classes) == [
        "FLUENCE_A_", "FLUENCE_B_"]
