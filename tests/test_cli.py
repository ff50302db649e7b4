"""fluence_core.cli: the ``fluence`` command line, run in process with CliRunner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from typer.testing import CliRunner, Result

from fluence_core.cli import app, load_plugin_commands
from fluence_core.testing import make_pod_dict

pytestmark = pytest.mark.usefixtures("clean_env")

REPO = Path(__file__).resolve().parent.parent
NODES = REPO / "examples" / "cluster" / "nodes.yaml"
HYBRID = REPO / "examples" / "cluster" / "hybrid-group.yaml"
BRAKET = REPO / "config" / "resources.yaml"
IBM = REPO / "config" / "resources-ibm.yaml"
CONFIGS = sorted((REPO / "config").glob("*.yaml"))


def fluence(*args: str | Path, **env: str) -> Result:
    """Run ``fluence ARGS`` in process; a wide terminal keeps tables and errors on one line."""
    load_plugin_commands(app)
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "250", **env})


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def failed(result: Result, code: int = 2) -> str:
    """The output of a command that exited ``code`` (errors go to stderr, verdicts to stdout)."""
    assert result.exit_code == code, result.output
    return result.output


# -- help and plugins -----------------------------------------------------------


def test_help_lists_the_commands() -> None:
    output = ok(fluence("--help"))
    assert all(command in output for command in ("graph", "plan", "plugins"))


def test_the_console_module_runs_as_a_program() -> None:
    result = subprocess.run([sys.executable, "-m", "fluence_core.cli", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "plan" in result.stdout


def test_plugins_lists_name_distribution_version_hooks_and_status() -> None:
    output = ok(fluence("plugins"))
    (row,) = [line for line in output.splitlines() if "embedded-matcher" in line]
    assert all(cell in row for cell in ("fluence-core", "0.1.0", "fluence_matcher", "loaded"))


def test_plugins_shows_a_block_listed_plugin_as_disabled() -> None:
    output = ok(fluence("plugins", FLUENCE_DISABLE_PLUGINS="embedded-matcher"))
    (row,) = [line for line in output.splitlines() if "embedded-matcher" in line]
    assert "disabled" in row


def test_a_bad_setting_exits_2_naming_the_variable() -> None:
    output = failed(fluence("plugins", FLUENCE_MATCH_POLICY="best"))
    assert "error:" in output and "FLUENCE_MATCH_POLICY='best'" in output


# -- fluence graph --------------------------------------------------------------


def test_graph_summarises_the_example_cluster_tainted_node_included() -> None:
    output = ok(fluence("graph", "--nodes", NODES, "--resources", BRAKET))
    assert "nodes=4 cores=64 gpus=2 memory_mib=262144 virtual=82 vertices=217" in output
    assert "worker-0" in output and "worker-3" in output


def test_graph_lists_the_virtual_resources_with_backend_and_attributes() -> None:
    output = ok(fluence("graph", "--nodes", NODES, "--resources", BRAKET))
    (qubits,) = [line for line in output.splitlines() if " qubit " in line]
    assert "80" in qubits and "rigetti_cepheus" in qubits and "provider=braket" in qubits


def test_graph_without_resources_is_classical_only() -> None:
    output = ok(fluence("graph", "--nodes", NODES))
    assert "virtual=0" in output and "Virtual resources" not in output


def test_graph_reads_fluence_resources_when_no_option_is_given() -> None:
    assert "virtual=82" in ok(fluence("graph", "--nodes", NODES, FLUENCE_RESOURCES=str(BRAKET)))


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_graph_builds_with_every_shipped_config(config: Path) -> None:
    assert "nodes=4" in ok(fluence("graph", "--nodes", NODES, "--resources", config))


def test_graph_jgf_prints_the_json_graph_alone_on_stdout() -> None:
    jgf = json.loads(ok(fluence("graph", "--nodes", NODES, "--resources", BRAKET, "--jgf")))
    assert len(jgf["graph"]["nodes"]) == 217
    assert len(jgf["graph"]["edges"]) == 216
    assert all(isinstance(v["id"], str) for v in jgf["graph"]["nodes"])


def test_graph_logs_its_summary_with_the_fluence_prefix() -> None:
    result = fluence("graph", "--nodes", NODES, "--resources", BRAKET, "--jgf")
    assert any(
        line.startswith("[fluence] ") and "vertices=217" in line
        for line in result.stderr.splitlines()
    )


def test_graph_of_1000_nodes_by_64_cores_builds(
    tmp_path: Path,
    make_node: Callable[..., dict[str, Any]],
    make_node_list: Callable[..., dict[str, Any]],
) -> None:
    nodes = tmp_path / "nodes.yaml"
    items = [make_node(f"node-{i:04d}", cpu=64, memory="256Gi") for i in range(1000)]
    nodes.write_text(yaml.dump(make_node_list(items), Dumper=yaml.CSafeDumper))
    output = ok(fluence("graph", "--nodes", nodes, "--resources", BRAKET))
    vertices = 1 + 1000 * (1 + 64 + 64) + 82  # cluster, nodes, cores, memory chunks, virtual
    assert (
        f"nodes=1000 cores=64000 gpus=0 memory_mib=262144000 virtual=82 vertices={vertices}"
        in output
    )
    assert "... 980 more" in output


# -- fluence plan ---------------------------------------------------------------


def test_plan_prints_the_jobspecs_of_the_example_group() -> None:
    output = ok(fluence("plan", HYBRID, "--nodes", NODES, "--resources", BRAKET))
    lines = output.splitlines()
    compute = [
        json.loads(lines[i + 1]) for i, line in enumerate(lines) if line.startswith("compute")
    ]
    (qpu,) = [json.loads(lines[i + 1]) for i, line in enumerate(lines) if line == "qpu jobspec"]
    slots = [slot for spec in compute for slot in spec["resources"]]
    assert sum(slot["count"] for slot in slots) == 4
    assert qpu["attributes"]["system"]["constraints"]["properties"] == [
        "virtual=true", "class=qpu", "fluxion.flux-framework.org/provider=braket",
    ]


def test_plan_shows_where_each_pod_would_land() -> None:
    output = ok(fluence("plan", HYBRID, "--nodes", NODES, "--resources", BRAKET))
    assert "Placement by the embedded matcher" in output
    rows = {line.split()[1]: line for line in output.splitlines() if "default/qaoa-" in line}
    assert set(rows) == {"default/qaoa-scout", "default/qaoa-worker-1", "default/qaoa-worker-2",
                         "default/qaoa-trainer"}
    assert "rigetti_cepheus" in rows["default/qaoa-scout"]
    assert "worker-1" in rows["default/qaoa-trainer"]  # the only node with GPUs
    assert all("worker-3" not in row for row in rows.values())


def test_plan_of_a_group_that_cannot_fit_exits_1_with_the_reason() -> None:
    # The scout pins provider=braket; the IBM config offers only qrmi backends.
    output = failed(fluence("plan", HYBRID, "--nodes", NODES, "--resources", IBM), code=1)
    assert "group plan: the qpu jobspec can never fit on this graph" in output


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_plan_places_an_unpinned_qpu_pod_with_every_shipped_config(
    config: Path, write_yaml: Callable[..., Path]
) -> None:
    pods = write_yaml(
        "pods.yaml", make_pod_dict("q", cpu="2", extra={"fluxion.flux-framework.org/qpu": "1"})
    )
    output = ok(fluence("plan", pods, "--nodes", NODES, "--resources", config))
    (row,) = [line for line in output.splitlines() if "default/q " in line]
    assert "worker-" in row


def test_plan_without_a_matcher_prints_the_jobspecs_only() -> None:
    result = fluence("plan", HYBRID, "--nodes", NODES, "--resources", BRAKET,
                     FLUENCE_DISABLE_PLUGINS="embedded-matcher,fluxion")
    output = ok(result)
    assert "qpu jobspec" in output and "no matcher available" in output
    assert "Placement" not in output


def test_plan_takes_a_group_name() -> None:
    output = failed(
        fluence("plan", HYBRID, "--nodes", NODES, "--resources", IBM, "--group", "qaoa"), code=1
    )
    assert "group qaoa:" in output


# -- errors exit non-zero with a clear message ----------------------------------


def test_a_missing_nodes_file_exits_2_naming_it(tmp_path: Path) -> None:
    output = failed(fluence("graph", "--nodes", tmp_path / "nowhere.yaml"))
    assert output.startswith("error: ") and "nowhere.yaml: cannot read" in output


def test_a_missing_nodes_option_is_a_usage_error() -> None:
    result = fluence("graph")
    assert result.exit_code == 2
    assert "--nodes" in result.output


def test_a_bad_resources_file_exits_2_naming_the_file_and_entry(
    write_yaml: Callable[..., Path],
) -> None:
    resources = write_yaml(
        "res.yaml", text="resources:\n  - type: qdevice\n    with: [{type: qpu}, {count: 2}]\n"
    )
    output = failed(fluence("graph", "--nodes", NODES, "--resources", resources))
    assert f"error: {resources}: resources[0].with[1]: missing 'type'" in output


def test_an_unknown_registry_name_exits_2(write_yaml: Callable[..., Path]) -> None:
    resources = write_yaml("res.yaml", text="resources:\n  - {type: qpu, attributes: aws-west}\n")
    assert "unknown attributes 'aws-west'" in failed(
        fluence("graph", "--nodes", NODES, "--resources", resources)
    )


def test_a_resources_file_without_a_resources_key_exits_2(write_yaml: Callable[..., Path]) -> None:
    resources = write_yaml("res.yaml", text="attributes: {aws: {provider: braket}}\n")
    assert "no 'resources' key" in failed(
        fluence("graph", "--nodes", NODES, "--resources", resources)
    )


def test_an_unknown_parent_exits_2_naming_it(write_yaml: Callable[..., Path]) -> None:
    resources = write_yaml("res.yaml", text="resources:\n  - {type: licence, parent: worker-9}\n")
    output = failed(fluence("graph", "--nodes", NODES, "--resources", resources))
    assert "resources[0]: unknown parent 'worker-9'" in output


def test_a_node_parent_hosts_the_resource(write_yaml: Callable[..., Path]) -> None:
    resources = write_yaml("res.yaml", text="resources:\n  - {type: licence, parent: worker-2}\n")
    assert "/cluster0/worker-2" in ok(fluence("graph", "--nodes", NODES, "--resources", resources))


def test_an_empty_resources_file_is_classical_only(write_yaml: Callable[..., Path]) -> None:
    resources = write_yaml("res.yaml", text="# nothing virtual\n")
    assert "virtual=0" in ok(fluence("graph", "--nodes", NODES, "--resources", resources))


def test_a_node_with_a_bad_quantity_exits_2_naming_the_node(
    write_yaml: Callable[..., Path], make_node: Callable[..., dict[str, Any]]
) -> None:
    nodes = write_yaml("nodes.yaml", make_node("n0", memory="lots"))
    assert "node n0" in failed(fluence("graph", "--nodes", nodes))


def test_plan_of_an_unknown_virtual_type_exits_2_naming_pod_and_type(
    write_yaml: Callable[..., Path],
) -> None:
    pods = write_yaml(
        "pods.yaml", make_pod_dict("q", extra={"fluxion.flux-framework.org/ionq": "1"})
    )
    output = failed(fluence("plan", pods, "--nodes", NODES, "--resources", BRAKET))
    assert "default/q" in output and "no virtual type 'ionq'" in output


def test_plan_of_a_file_without_pods_exits_2(write_yaml: Callable[..., Path]) -> None:
    pods = write_yaml("pods.yaml", {"kind": "Service", "metadata": {"name": "s"}})
    assert "no Pod objects" in failed(fluence("plan", pods, "--nodes", NODES))


def test_plan_of_a_pod_with_a_bad_quantity_exits_2(write_yaml: Callable[..., Path]) -> None:
    pods = write_yaml("pods.yaml", make_pod_dict("q", cpu="many"))
    failure = failed(fluence("plan", pods, "--nodes", NODES))
    assert "pod default/q: spec.containers[0].resources.requests.cpu" in failure


def test_graph_with_a_bad_setting_exits_2() -> None:
    assert "FLUENCE_MEMORY_CHUNKS_PER_CORE" in failed(
        fluence("graph", "--nodes", NODES, FLUENCE_MEMORY_CHUNKS_PER_CORE="0")
    )


def test_settings_lists_every_variable_with_its_current_value(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from fluence_core.settings import SettingsVariables

    monkeypatch.setenv("FLUENCE_MATCH_POLICY", "hinode")
    result = fluence("settings")
    assert result.exit_code == 0, result.output
    for name in SettingsVariables.model_fields:
        assert f"FLUENCE_{name.upper()}" in result.output
    assert "hinode" in result.output


def test_settings_lists_a_plugins_own_settings_beside_the_cores(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from pydantic import Field
    from pydantic_settings import SettingsConfigDict

    from fluence_core import hookimpl
    from fluence_core.cli import settings as settings_command
    from fluence_core.plugins import get_plugin_manager
    from fluence_core.settings import PluginSettings

    class WidgetSettings(PluginSettings):
        model_config = SettingsConfigDict(env_prefix="FLUENCE_WIDGET_")
        size: int = Field(default=3, description="How big the widget is.")

    class Widget:
        @hookimpl
        def fluence_settings(self) -> list[type[PluginSettings]]:
            return [WidgetSettings]

    monkeypatch.setattr(settings_command, "get_plugin_manager", lambda settings: get_plugin_manager(
        settings, extra_plugins=[("widget", Widget())]))
    monkeypatch.setenv("FLUENCE_WIDGET_SIZE", "11")
    result = fluence("settings")
    assert result.exit_code == 0, result.output
    [line] = [line for line in result.output.splitlines() if "FLUENCE_WIDGET_SIZE" in line]
    assert "11" in line and "How big the widget is." in line


def test_plugins_check_passes_when_every_plugin_works() -> None:
    ok(fluence("plugins", "--check", FLUENCE_DISABLE_PLUGINS="fluxion"))


def test_settings_off_a_terminal_prints_every_name_whole_however_narrow() -> None:
    from fluence_core.settings import SettingsVariables

    result = fluence("settings", COLUMNS="40")  # CliRunner's output is no terminal
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split("\t") == ["variable", "value", "default", "read by", "meaning"]
    variables = {line.split("\t")[0] for line in lines[1:]}
    for name in SettingsVariables.model_fields:
        assert f"FLUENCE_{name.upper()}" in variables
    assert all(len(line.split("\t")) == 5 for line in lines)


def test_settings_says_which_component_reads_each_variable() -> None:
    result = fluence("settings", COLUMNS="400")
    assert result.exit_code == 0, result.output
    assert "read by" in result.output
    line = next(x for x in result.output.splitlines() if "FLUENCE_SIDECAR_POLL_INTERVAL" in x)
    assert "sidecar" in line
    line = next(x for x in result.output.splitlines() if "FLUENCE_SESSION_HOLD_TIMEOUT" in x)
    assert "scout" in line


def test_webhook_match_conditions_prints_what_the_webhook_publishes() -> None:
    from fluence_core.plugins import get_plugin_manager
    from fluence_core.settings import load_settings
    from fluence_core.webhook import build_service

    printed = yaml.safe_load(ok(fluence("webhook", "--match-conditions")))
    settings = load_settings()
    expected = build_service(settings, get_plugin_manager(settings), None).match_conditions
    assert printed == {"matchConditions": expected}
    assert [c["name"] for c in expected] == ["scheduler-is-fluence", "needs-fluence"]
