"""``fluence stage DIR`` lays out a self-contained runtime."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from fluence_core.cli import app, load_plugin_commands
from fluence_core.plugins import get_plugin_manager
from fluence_core.hybrid import boot
from fluence_core.runtime.provider import collect_providers
from fluence_core.settings import load_settings


def installed() -> list[str]:
    """The provider plugins installed here (all optional: the tests hold for none too)."""
    return sorted(p.name for p in collect_providers(get_plugin_manager(load_settings())))


def test_the_command_stages_every_installed_provider(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "fluence_core.cli", "stage", str(tmp_path / "s")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "s" / "fluence_staged" / "manifest.json").read_text())
    staged = {e["name"]: e for e in manifest["providers"]}
    assert sorted(staged) == installed()
    for name, entry in staged.items():
        assert entry["module"] == f"fluence_staged.interceptors.{name}"
    for name in staged:
        assert (tmp_path / "s" / "fluence_staged" / "interceptors" / f"{name}.py").is_file()
    assert (tmp_path / "s" / "sitecustomize.py").is_file()


def test_cli_stage_command(tmp_path) -> None:
    load_plugin_commands(app)
    result = CliRunner().invoke(app, ["stage", str(tmp_path / "d")])
    assert result.exit_code == 0, result.output
    assert all(name in result.output for name in installed())
    assert (tmp_path / "d" / "fluence_staged" / "names.py").is_file()


def test_boot_needs_a_pod_uid_and_respects_the_provider_attribute(tmp_path, monkeypatch) -> None:
    package = tmp_path / "fluence_staged"
    (package / "interceptors").mkdir(parents=True)
    for file in ("__init__.py", "interceptors/__init__.py"):
        (package / file).write_text("")
    (package / "interceptors" / "a.py").write_text(
        "def install_interceptor(uid):\n    return uid == 'u'\n"
    )
    (package / "interceptors" / "b.py").write_text(
        "def install_interceptor(uid):\n    raise RuntimeError('x')\n"
    )
    (package / "manifest.json").write_text(json.dumps({"providers": [
        {"name": "a", "module": "fluence_staged.interceptors.a", "match": {"provider": "a"}},
        {"name": "b", "module": "fluence_staged.interceptors.b", "match": {"provider": "b"}}]}))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(boot, "__file__", str(package / "__init__.py"))
    assert boot.boot({}) == {}
    assert boot.boot({"FLUENCE_POD_UID": "u", "FLUXION_PROVIDER": "a"}) == {"a": True}
    assert boot.boot({"FLUENCE_POD_UID": "u"}) == {
        "a": True,
        "b": False,
    }  # no attributes: all, soft
