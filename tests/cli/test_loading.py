"""fluence_core.cli.loading: every plugin's commands arrive, and what goes wrong is said."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from fluence_core import hookimpl
from fluence_core.cli.base import FluenceTyper
from fluence_core.cli.loading import add_commands, selection_settings
from fluence_core.errors import FluenceError
from fluence_core.plugins import PluginInfo, get_plugin_manager
from fluence_core.settings import Settings, SettingsVariables

pytestmark = pytest.mark.usefixtures("clean_env")


def fluence(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The console script's code path (``main``) in a fresh interpreter."""
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("FLUENCE_")}
    return subprocess.run([sys.executable, "-m", "fluence_core.cli", *args],
                          env={**clean, "COLUMNS": "250", **env},
                          capture_output=True, text=True, timeout=120)


class Broken:
    @hookimpl
    def fluence_cli(self, app: Any) -> None:
        raise RuntimeError("boom")


class Twin:
    @hookimpl
    def fluence_cli(self, app: Any) -> None:
        app.command("plugins")(lambda: None)


class Raising:
    @hookimpl
    def fluence_cli(self, app: Any) -> None:
        def hello() -> None:
            raise FluenceError("hello refuses")

        app.command("hello")(hello)


def _names(app: typer.Typer) -> list[str | None]:
    return [c.name for c in app.registered_commands]


def test_a_bad_setting_is_named_by_the_command_the_user_ran() -> None:
    done = fluence("up", FLUENCE_MATCH_POLICY="bogus")
    assert done.returncode == 2, done.stderr
    assert "No such command" not in done.stderr
    assert "FLUENCE_MATCH_POLICY='bogus'" in done.stderr


def test_a_bad_setting_leaves_the_block_list_in_force(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLUENCE_MATCH_POLICY", "bogus")
    monkeypatch.setenv("FLUENCE_DISABLE_PLUGINS", "command-sim")
    settings = selection_settings()
    assert settings.disable_plugins == ("command-sim",)
    assert settings.graph.match_policy == SettingsVariables.model_fields["match_policy"].default


def test_disabling_the_up_command_keeps_the_scheduling_built_ins() -> None:
    manager = get_plugin_manager(Settings(disable_plugins=["command-up"]))
    assert manager.infos["command-up"].status == "disabled"
    for name in ("pod-limit", "backend-annotations", "command-status"):
        assert manager.infos[name].status == "loaded", name
    app = FluenceTyper()
    add_commands(app, manager)
    assert "up" not in _names(app) and "status" in _names(app)


def test_disabling_the_pod_limit_keeps_up_and_the_backend_annotations() -> None:
    manager = get_plugin_manager(Settings(disable_plugins=["pod-limit"]))
    assert manager.infos["pod-limit"].status == "disabled"
    assert manager.infos["backend-annotations"].hooks == ["fluence_reserve", "fluence_unreserve"]
    app = FluenceTyper()
    add_commands(app, manager)
    assert "up" in _names(app)


def test_a_plugin_that_raises_is_named_and_the_others_still_load(
    capsys: pytest.CaptureFixture[str],
) -> None:
    manager = get_plugin_manager(Settings(), extra_plugins=[("broken", Broken())])
    app = FluenceTyper()
    add_commands(app, manager)
    assert "plugin broken failed to add its commands: RuntimeError: boom" in capsys.readouterr().err
    assert {"up", "stage", "plugins"} <= set(_names(app))


def test_a_plugin_that_failed_to_import_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    manager = get_plugin_manager(Settings())
    manager.infos["ghost"] = PluginInfo("ghost", "fluence-ghost", "1.0",
                                        status="failed to load: No module named 'ghost'")
    add_commands(FluenceTyper(), manager)
    err = capsys.readouterr().err
    assert "plugin ghost (fluence-ghost) failed to load: No module named 'ghost'" in err


def test_two_plugins_taking_one_command_name_is_reported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    manager = get_plugin_manager(Settings(), extra_plugins=[("twin", Twin())])
    add_commands(FluenceTyper(), manager)
    assert ("plugin twin adds command 'plugins', which plugin command-plugins already added"
            in capsys.readouterr().err)


def test_a_plugin_command_gets_the_one_error_path() -> None:
    manager = get_plugin_manager(Settings(), extra_plugins=[("raising", Raising())])
    app = FluenceTyper()
    add_commands(app, manager)
    result = CliRunner().invoke(app, ["hello"])
    assert result.exit_code == 2
    assert result.stderr == "error: hello refuses\n"


def test_a_hook_without_a_spec_stops_the_command_line_with_its_name() -> None:
    done = subprocess.run(
        [sys.executable, "-c",
         "import fluence_core.plugins as p, fluence_core.cli as c\n"
         "from fluence_core import hookimpl\n"
         "class Typo:\n"
         "    @hookimpl\n"
         "    def fluence_clii(self, app): pass\n"
         "real = p.get_plugin_manager\n"
         "p_get = lambda s: real(s, extra_plugins=[('typo', Typo())])\n"
         "import fluence_core.cli.loading as l; l.get_plugin_manager = p_get\n"
         "c.main()\n", "plugins"],
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "error: a plugin implements an unknown hook" in done.stderr
    assert "fluence_clii" in done.stderr
