"""fluence_core.hookspecs: every hook documented argument by argument, and typed.

What each hook does for a plugin is tested where the hook is called: through a
scheduler's cycle (``tests/scheduler/test_hooks_in_the_cycle.py``, ``test_cycle``,
``test_scheduler``, ``test_binder``), through the webhook's service
(``tests/webhook/admission/test_hooks_in_admission.py``), the CLI (``tests/cli/test_loading.py``,
``test_cli``) and the sidecar's providers (``tests/runtime/test_provider.py``). Here:
the hook specifications themselves, which a plugin author reads.
"""

from __future__ import annotations

import ast
import inspect
import re
import typing
from typing import Any, Mapping, Sequence

import fluence_core
from fluence_core import hookspecs
from fluence_core.runtime.provider import Provider
from fluence_core.scheduler.context import SchedulingContext
from fluence_core.webhook.admission.base import AdmissionContext, Handler

HOOK_NAMES = sorted(name for name, _ in inspect.getmembers(hookspecs, inspect.isfunction)
                    if name.startswith("fluence_"))


# -- the documentation a plugin author reads --------------------------------------


def documented_arguments(doc: str | None) -> list[str]:
    """The names of a docstring's ``:param name:`` entries, in order."""
    return re.findall(r"^\s*:param (\w+):", doc or "", re.MULTILINE)


def test_documented_arguments_reads_the_param_entries_in_order() -> None:
    def hook(group: object, ctx: object) -> None:
        """Do a thing.

        :param ctx: second, though listed first.
        :param group: the group,
            on two lines.
        """

    assert documented_arguments(hook.__doc__) == ["ctx", "group"]
    assert documented_arguments("No entries; a :param in prose is not one.") == []


def test_every_hook_has_a_docstring() -> None:
    undocumented = [
        name for name in HOOK_NAMES if not (getattr(hookspecs, name).__doc__ or "").strip()
    ]
    assert not undocumented


def test_every_hook_documents_each_of_its_arguments_in_order() -> None:
    # A plugin implements a hook from its docstring: an argument renamed, added or
    # dropped in the signature must be renamed, added or dropped there too.
    drift = {}
    for name in HOOK_NAMES:
        hook = getattr(hookspecs, name)
        wanted = list(inspect.signature(hook).parameters)
        if documented_arguments(hook.__doc__) != wanted:
            drift[name] = (documented_arguments(hook.__doc__), wanted)
    assert not drift, "hook: (documented, signature)"


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
