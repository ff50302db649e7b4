"""The generated scripts: valid bash, and run against a stub ``flux`` that records its arguments."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from fluence_flux import scripts, workload
from fluence_flux.curve import curve_certificate, z85
from flux_helpers import job, jobset

from fluence_core.api import names

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")

STUB = f"""#!{sys.executable}
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FLUX_STUB_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
if args[:1] == ["start"]:
    # the first non-option is the initial program; everything after it is its argv
    first = next((i for i, a in enumerate(args[1:], 1) if not a.startswith("-")), None)
    sys.exit(subprocess.call(args[first:]) if first is not None else 0)
if args[:2] == ["overlay", "status"] and "--wait=full" in args:
    sys.exit(int(os.environ.get("FLUX_STUB_OVERLAY_EXIT", "0")))
if args[:2] == ["overlay", "status"]:
    print("0 lmp-0: partial\\n1 lmp-1: full\\n2 lmp-2: lost\\n3 lmp-3: offline")
    sys.exit(0)
if args[:2] == ["resource", "list"]:
    print(os.environ.get("FLUX_STUB_NODES_UP", "4"))
    sys.exit(0)
if args[:1] == ["submit"]:
    print("f2Fo6Tg9")
    sys.exit(0)
if args[:2] == ["job", "attach"]:
    print("user command output")
    sys.exit(int(os.environ.get("FLUX_STUB_EXIT", "0")))
sys.exit(99)
"""


def lammps(**kw):
    return workload.read(job(**kw), "default")


@pytest.fixture
def sandbox(tmp_path):
    """A flux root and a scripts dir like the pod's mounts, and a stub flux on PATH."""
    root, mounted, view, stubs = (tmp_path / d for d in ("mnt-flux", "scripts", "opt-view", "stub"))
    for folder in (mounted, view / "bin", stubs):
        folder.mkdir(parents=True)
    work = lammps(annotations={names.FLUX_TASKS_PER_NODE_ANNOTATION: "2"})
    (mounted / "init.sh").write_text(scripts.init_script(work, "/opt/view", 8050))
    (mounted / "entrypoint.sh").write_text(scripts.entrypoint_script(work, 45))
    (mounted / "curve.cert").write_text(curve_certificate("lmp"))
    (view / "lib-marker").write_text("flux lives here")
    (stubs / "flux").write_text(STUB)
    (stubs / "flux").chmod(0o755)
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "FLUENCE_FLUX_ROOT": str(root),
           "FLUENCE_FLUX_SCRIPTS": str(mounted), "FLUENCE_FLUX_VIEW_SOURCE": str(view),
           "FLUX_STUB_LOG": str(tmp_path / "flux.log"), "HOME": str(tmp_path)}
    return tmp_path, root, mounted, env


def run(script: Path, env, *args: str, cwd: Path | None = None, **extra: str):
    return subprocess.run([BASH, str(script), *args], env={**env, **extra}, cwd=cwd,
                          capture_output=True, text=True, timeout=30)


def calls(tmp_path) -> list[list[str]]:
    log = tmp_path / "flux.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("render", [
    lambda w: scripts.init_script(w, "/opt/view", 8050),
    lambda w: scripts.entrypoint_script(w, 600)])
@pytest.mark.parametrize("obj", [job(), jobset(annotations={names.FLUX_ANNOTATION: "true"})])
def test_the_scripts_are_valid_bash(tmp_path, render, obj):
    path = tmp_path / "script.sh"
    path.write_text(render(workload.read(obj, "default")))
    checked = subprocess.run([BASH, "-n", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_init_copies_the_view_and_writes_the_broker_config_and_certificate(sandbox):
    tmp_path, root, mounted, env = sandbox
    done = run(mounted / "init.sh", env)
    assert done.returncode == 0, done.stderr
    assert (root / "view" / "lib-marker").read_text() == "flux lives here"
    config = (root / "config" / "broker.toml").read_text()
    assert f'curve_cert = "{root}/run/curve.cert"' in config
    assert 'hosts = [\n  { host = "lmp-[0-3]" },\n]' in config
    assert "default_port = 8050" in config and 'default_connect = "tcp://%h.lmp:%p"' in config
    import tomllib
    parsed = tomllib.loads(config)
    assert parsed["bootstrap"]["hosts"] == [{"host": "lmp-[0-3]"}]
    assert parsed["sched-fluxion-qmanager"]["queue-policy"] == "fcfs"
    assert (root / "config" / "curve.cert").read_text() == (mounted / "curve.cert").read_text()
    assert stat.S_IMODE((root / "run").stat().st_mode) == 0o1777


def test_rank_zero_starts_flux_and_submits_the_users_command_across_all_nodes(sandbox):
    tmp_path, root, mounted, env = sandbox
    assert run(mounted / "init.sh", env).returncode == 0
    workdir = tmp_path / "work dir"
    workdir.mkdir()
    done = run(mounted / "entrypoint.sh", env, "lmp", "-in", "in file.lj", cwd=workdir,
               JOB_COMPLETION_INDEX="0")
    assert done.returncode == 0, done.stderr
    assert "user command output" in done.stdout
    start, wait, listed, submit, attach = calls(tmp_path)
    assert start == ["start", f"--broker-opts=--config-path={root}/config/broker.toml",
                     "--setattr=broker.quorum=1",
                     "/bin/bash", str(mounted / "entrypoint.sh"), scripts.SUBMIT_FLAG,
                     "lmp", "-in", "in file.lj"]
    assert wait == ["overlay", "status", "--wait=full", "--timeout=45s"]
    assert listed == ["resource", "list", "--states=up", "--no-header", "--format={nnodes}"]
    assert submit == ["submit", "-N", "4", "--tasks-per-node", "2", "--cwd", str(workdir),
                      "lmp", "-in", "in file.lj"]
    assert attach == ["job", "attach", "f2Fo6Tg9"]
    cert = root / "run" / "curve.cert"
    assert stat.S_IMODE(cert.stat().st_mode) == 0o400


@pytest.mark.parametrize("status", [1, 3, 137])
def test_rank_zero_exits_with_the_users_command_status(sandbox, status):
    tmp_path, root, mounted, env = sandbox
    assert run(mounted / "init.sh", env).returncode == 0
    done = run(mounted / "entrypoint.sh", env, "false", JOB_COMPLETION_INDEX="0",
               FLUX_STUB_EXIT=str(status))
    assert done.returncode == status


def test_rank_zero_fails_naming_the_brokers_that_never_joined(sandbox):
    tmp_path, root, mounted, env = sandbox
    assert run(mounted / "init.sh", env).returncode == 0
    done = run(mounted / "entrypoint.sh", env, "lmp", JOB_COMPLETION_INDEX="0",
               FLUX_STUB_OVERLAY_EXIT="1")
    assert done.returncode == scripts.START_TIMEOUT_EXIT
    assert "not every broker joined rank 0 within 45s" in done.stderr
    assert "never came up: lmp-2 lmp-3" in done.stderr
    assert [call[:2] for call in calls(tmp_path)] == [
        ["start", f"--broker-opts=--config-path={root}/config/broker.toml"],
        ["overlay", "status"], ["overlay", "status"]]


def test_rank_zero_fails_when_the_scheduler_never_knows_every_node(sandbox):
    tmp_path, root, mounted, env = sandbox
    work = lammps(annotations={names.FLUX_TASKS_PER_NODE_ANNOTATION: "2"})
    (mounted / "entrypoint.sh").write_text(scripts.entrypoint_script(work, 2))
    assert run(mounted / "init.sh", env).returncode == 0
    done = run(mounted / "entrypoint.sh", env, "lmp", JOB_COMPLETION_INDEX="0",
               FLUX_STUB_NODES_UP="3", FLUX_STUB_LOG=str(tmp_path / "flux.log"))
    assert done.returncode == scripts.START_TIMEOUT_EXIT
    assert "within 2s" in done.stderr
    assert not any(call[:1] == ["submit"] for call in calls(tmp_path))


def test_other_ranks_run_a_broker_without_a_command(sandbox):
    tmp_path, root, mounted, env = sandbox
    assert run(mounted / "init.sh", env).returncode == 0
    done = run(mounted / "entrypoint.sh", env, "lmp", JOB_COMPLETION_INDEX="3")
    assert done.returncode == 0, done.stderr
    assert calls(tmp_path) == [["start", f"--broker-opts=--config-path={root}/config/broker.toml"]]


def test_the_flux_of_the_view_is_preferred_over_one_on_path(sandbox):
    tmp_path, root, mounted, env = sandbox
    assert run(mounted / "init.sh", env).returncode == 0
    view_flux = root / "view" / "bin" / "flux"
    view_flux.write_text("#!/bin/bash\necho \"view $*\" >> \"$FLUX_STUB_LOG.view\"\n")
    view_flux.chmod(0o755)
    done = run(mounted / "entrypoint.sh", env, "lmp", JOB_COMPLETION_INDEX="1")
    assert done.returncode == 0
    assert (tmp_path / "flux.log.view").read_text().startswith("view start")
    assert calls(tmp_path) == []


def test_a_pod_without_a_completion_index_fails_with_a_message(sandbox):
    tmp_path, root, mounted, env = sandbox
    done = run(mounted / "entrypoint.sh", env, "lmp")
    assert done.returncode == 2 and "JOB_COMPLETION_INDEX is not set" in done.stderr
    assert calls(tmp_path) == []


def test_z85_matches_the_rfc_test_vector():
    assert z85(bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])) == "HelloWorld"


def test_the_curve_certificate_has_forty_character_keys():
    cert = curve_certificate("lmp")
    keys = [line.split('"')[1] for line in cert.splitlines() if "-key = " in line]
    assert len(keys) == 2 and all(len(k) == 40 for k in keys)
