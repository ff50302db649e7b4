"""fluence_core.plugins: entry points, the block-list, and loud failures."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from typing import Any

import pytest
from pydantic_settings import SettingsConfigDict

from fluence_core import hookimpl
from fluence_core.errors import FluenceError
from fluence_core.matcher.embedded import EmbeddedMatcher
from fluence_core.plugins import FluencePluginManager, get_plugin_manager, plugin_settings
from fluence_core.settings import PluginSettings, Settings, load_settings

pytestmark = pytest.mark.usefixtures("clean_env")


class Refuser:
    @hookimpl
    def fluence_admit(self, pod: Any, ctx: Any) -> str | None:
        return "no"


def test_the_manager_loads_the_fluence_entry_point_group() -> None:
    manager = get_plugin_manager(Settings())
    info = manager.infos["embedded-matcher"]
    assert (info.distribution, info.status) == ("fluence-core", "loaded")
    assert info.version
    assert manager.get_plugin("embedded-matcher") is not None


def test_a_loaded_plugin_lists_the_hooks_it_implements() -> None:
    assert get_plugin_manager(Settings()).infos["embedded-matcher"].hooks == ["fluence_matcher"]


def test_built_ins_answer_hooks_like_any_plugin(small_graph: Any) -> None:
    # With every other installed plugin blocked, the built-in default answers.
    others = [n for n in get_plugin_manager(Settings()).infos if n != "embedded-matcher"]
    settings = Settings(disable_plugins=others)
    manager = get_plugin_manager(settings)
    assert isinstance(
        manager.hook.fluence_matcher(settings=settings, graph=small_graph), EmbeddedMatcher
    )


def test_a_block_listed_plugin_is_not_registered_but_reported_disabled() -> None:
    manager = get_plugin_manager(Settings(disable_plugins=["embedded-matcher"]))
    assert manager.get_plugin("embedded-matcher") is None
    assert manager.infos["embedded-matcher"].status == "disabled"


def test_fluence_disable_plugins_is_the_block_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_DISABLE_PLUGINS", "embedded-matcher")
    manager = get_plugin_manager(load_settings())
    assert manager.infos["embedded-matcher"].status == "disabled"


def test_the_block_list_applies_to_in_process_plugins_too() -> None:
    manager = get_plugin_manager(
        Settings(disable_plugins=["refuser"]), extra_plugins=[("refuser", Refuser())]
    )
    assert manager.get_plugin("refuser") is None


def test_in_process_plugins_are_registered_and_reported() -> None:
    manager = get_plugin_manager(Settings(), extra_plugins=[("refuser", Refuser())])
    assert manager.infos["refuser"].distribution == "(in process)"
    assert manager.infos["refuser"].hooks == ["fluence_admit"]


def test_a_misspelled_hook_implementation_fails_loudly() -> None:
    class Misspelled:
        @hookimpl
        def fluence_prefiltre(self, group: Any, ctx: Any) -> None:
            return None

    with pytest.raises(FluenceError, match="fluence_prefiltre"):
        get_plugin_manager(Settings(), extra_plugins=[("typo", Misspelled())])


def test_a_hook_implementation_with_an_unknown_argument_fails_loudly() -> None:
    class WrongArgument:
        @hookimpl
        def fluence_admit(self, pod: Any, context: Any) -> None:
            return None

    with pytest.raises(FluenceError, match=r"(?s)plugin wrong.*context"):
        get_plugin_manager(Settings(), extra_plugins=[("wrong", WrongArgument())])


def test_a_plugin_that_fails_to_import_is_reported_not_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = EntryPoint("broken", "fluence_no_such_module_xyz", "fluence")
    monkeypatch.setattr("fluence_core.plugins._entry_points", lambda: [broken])
    manager = get_plugin_manager(Settings())
    assert manager.infos["broken"].status.startswith("failed to load: ")
    assert "fluence_no_such_module_xyz" in manager.infos["broken"].status


def test_a_plugin_can_report_its_own_status(monkeypatch: pytest.MonkeyPatch) -> None:
    class Degraded:
        @hookimpl
        def fluence_providers(self) -> list[Any]:
            return []

        def plugin_status(self) -> str:
            return "library missing"

    manager = get_plugin_manager(Settings(), extra_plugins=[("degraded", Degraded())])
    assert manager.infos["degraded"].status == "library missing"


def test_the_manager_knows_every_hookspec() -> None:
    from fluence_core import hookspecs

    declared = {name for name in dir(hookspecs) if name.startswith("fluence_")}
    assert declared <= {
        name for name in dir(FluencePluginManager().hook) if name.startswith("fluence_")
    }


# -- plugin_settings: what `fluence settings` lists beside the core's -----------


def settings_manager(*classes: object) -> FluencePluginManager:
    class Contributes:
        @hookimpl
        def fluence_settings(self) -> list[object]:
            return list(classes)

    installed = list(get_plugin_manager(Settings()).infos)
    return get_plugin_manager(Settings(disable_plugins=installed),
                              extra_plugins=[("contributes", Contributes())])


class GoodSettings(PluginSettings):
    model_config = SettingsConfigDict(env_prefix="FLUENCE_GOOD_")


class SamePrefix(PluginSettings):
    model_config = SettingsConfigDict(env_prefix="FLUENCE_GOOD_")


class NoPrefix(PluginSettings):
    pass


def test_plugin_settings_returns_the_contributed_classes_in_order() -> None:
    assert plugin_settings(settings_manager(GoodSettings)) == [GoodSettings]


@pytest.mark.parametrize(("contributed", "message"), [
    ((Settings,), "not a PluginSettings class"),
    (("FLUENCE_X_",), "not a PluginSettings class"),
    ((NoPrefix,), "NoPrefix needs an env_prefix of its own under FLUENCE_"),
    ((GoodSettings, SamePrefix), "SamePrefix and GoodSettings share the prefix FLUENCE_GOOD_"),
])
def test_plugin_settings_refuses_a_bad_contribution_by_name(contributed: tuple[object, ...],
                                                            message: str) -> None:
    with pytest.raises(FluenceError, match=message):
        plugin_settings(settings_manager(*contributed))
