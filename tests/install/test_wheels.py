"""Every distribution as users install it: wheels, non-editable, in a fresh venv.

The wheels are built and installed by the Containerfile's own pip steps (read
from it, with the image's paths mapped onto this checkout), after the core wheel
alone and each plugin on top of it have been tried. Every command runs from a
folder outside the checkout, so nothing of the sources can stand in for the install.

Slow (seven wheels, their dependencies), so it runs when ``FLUENCE_INSTALL_TESTS=1``;
``.ci/run`` sets it in its second stage.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import venv
from dataclasses import dataclass
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path
from types import ModuleType

import pytest

from fluence_core import names
from fluence_core.testing_apiserver import ensure_namespace, find_assets, free_port, start_apiserver

REPO = Path(__file__).resolve().parents[2]
CONTAINERFILE = REPO / "Containerfile"
DISTRIBUTIONS = ["fluence-core"] + sorted(
    p.parent.name for p in (REPO / "plugins").glob("*/pyproject.toml"))

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("FLUENCE_INSTALL_TESTS") != "1",
        reason="FLUENCE_INSTALL_TESTS=1 builds every wheel and installs it in a fresh venv (slow)"),
    # installing the vendor SDKs' dependencies takes minutes, more than the suite's 300 s
    pytest.mark.timeout(1800),
]


def _lint() -> ModuleType:
    """The Containerfile linter (a script without .py), for its instruction parser."""
    loader = SourceFileLoader("lint_containerfiles", str(REPO / ".ci" / "lint-containerfiles"))
    spec = spec_from_loader(loader.name, loader)
    assert spec is not None
    module = module_from_spec(spec)
    sys.modules[loader.name] = module  # its dataclasses look their module up
    loader.exec_module(module)
    return module


def image_pip_steps() -> list[str]:
    """The Containerfile's pip commands, in order, without their RUN options."""
    steps = []
    for item in _lint().instructions(CONTAINERFILE.read_text()):
        if item.keyword != "RUN":
            continue
        command = re.sub(r"^(--\S+\s+)+", "", item.rest)
        if command.startswith("pip "):
            steps.append(command)
    return steps


@dataclass
class Install:
    """A fresh venv and where things are."""

    root: Path
    wheels: Path
    work: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def run(
        self, *args: str | Path, check: bool = True, **env: str
    ) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items()
                 if not k.upper().startswith(("FLUENCE_", "PYTHON", "VIRTUAL_ENV"))}
        clean.update(PATH=f"{self.root / 'bin'}:{clean.get('PATH', '/usr/bin:/bin')}",
                     COLUMNS="250", **env)
        started = time.perf_counter()
        done = subprocess.run([str(a) for a in args], cwd=self.work, env=clean,
                              capture_output=True, text=True, timeout=1200)
        print(f"[{time.perf_counter() - started:6.1f} s] {' '.join(map(str, args))[:120]}")
        if check:
            assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
        return done

    def shell(self, command: str) -> None:
        """One of the Containerfile's pip steps, with the image's paths mapped here."""
        mapped = (command.replace("/src", str(REPO)).replace("/wheels", str(self.wheels))
                  .replace("pip ", f"{self.python} -m pip ", 1))
        if " wheel " in mapped:
            # the test's own setuptools builds (isolated builds only add download time)
            mapped = mapped.replace(" wheel ", " wheel --no-build-isolation ", 1)
            mapped = mapped.replace(str(self.python), sys.executable, 1)
        self.run("bash", "-c", mapped)

    def statuses(self) -> dict[str, tuple[str, str]]:
        """Each plugin's (distribution, status) as the installed fluence sees them."""
        code = ("import json; from fluence_core.plugins import get_plugin_manager;"
                "from fluence_core.settings import Settings;"
                "m = get_plugin_manager(Settings());"
                "print(json.dumps({n: [i.distribution, i.status] for n, i in m.infos.items()}))")
        shown = json.loads(self.run(self.python, "-c", code).stdout)
        return {name: (dist, status) for name, (dist, status) in shown.items()}


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory) -> Install:
    root = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=True, symlinks=True, clear=True).create(root)
    made = Install(root, tmp_path_factory.mktemp("wheels"), tmp_path_factory.mktemp("work"))
    made.run(made.python, "-m", "pip", "install", "-q", "--upgrade", "pip")
    return made


def test_the_image_builds_one_wheel_per_distribution(install: Install) -> None:
    build, _ = image_pip_steps()
    install.shell(build)
    built = sorted(re.sub(r"-\d.*", "", wheel.name).replace("_", "-")
                   for wheel in install.wheels.glob("*.whl"))
    assert built == sorted(DISTRIBUTIONS)


def test_the_core_wheel_alone_stages_simulates_and_lists_its_plugins(install: Install) -> None:
    (core,) = install.wheels.glob("fluence_core-*.whl")
    install.run(install.python, "-m", "pip", "install", "-q", core)
    where = install.run(install.python, "-c", "import fluence_core; print(fluence_core.__file__)")
    assert where.stdout.startswith(str(install.root)), where.stdout  # the wheel, not the checkout
    statuses = install.statuses()
    assert {dist for dist, _ in statuses.values()} == {"fluence-core"}
    assert all(status == "loaded" for _, status in statuses.values()), statuses
    install.run("fluence", "plugins", "--check")
    stage = install.run("fluence", "stage", install.work / "staged")
    assert "staged no providers" in stage.stdout
    shipped = REPO / "fluence_core" / "hybrid" / "hooks" / "sitecustomize.py"
    assert (install.work / "staged" / "sitecustomize.py").read_bytes() == shipped.read_bytes()
    assert (install.work / "staged" / "fluence_staged" / "manifest.json").is_file()
    sim = install.run("fluence", "sim", "--no-plot", "-o", install.work / "sim")
    assert "pods placed" in sim.stdout
    graph = install.run("fluence", "graph", "--nodes", REPO / "examples" / "cluster" / "nodes.yaml",
                        "--resources", REPO / "config" / "resources.yaml")
    assert re.search(r"nodes=\d+ cores=\d+ .* virtual=82 ", graph.stdout), graph.stdout
    fixtures = REPO / "tests" / "runtime" / "fixtures"
    chosen = install.run("kubectl-fluence", "select", "--resources",
                         fixtures / "resources-qpus.yaml", "--prices", fixtures / "prices.yaml")
    assert chosen.stdout.strip() == "ibm_torino"  # kubectl finds this script on PATH
    bad = install.run("fluence", "up", check=False, FLUENCE_MATCH_POLICY="bogus")
    assert bad.returncode == 2 and "FLUENCE_MATCH_POLICY='bogus'" in bad.stderr


def test_each_plugin_installs_on_the_core_and_loads(install: Install) -> None:
    for distribution in DISTRIBUTIONS[1:]:
        (wheel,) = install.wheels.glob(distribution.replace("-", "_") + "-*.whl")
        install.run(install.python, "-m", "pip", "install", "-q", wheel)
        mine = {name: status for name, (dist, status) in install.statuses().items()
                if dist == distribution}
        assert mine, f"{distribution} registers no fluence entry point"
        for name, status in mine.items():
            assert not status.startswith("failed"), f"{distribution}: {name}: {status}"


def test_the_image_install_step_gives_every_plugin_and_a_working_stage(install: Install) -> None:
    _, install_step = image_pip_steps()
    install.shell(install_step)
    statuses = install.statuses()
    assert {dist for dist, _ in statuses.values()} == set(DISTRIBUTIONS)
    library = os.environ.get("FLUENCE_FLUXION_LIB")
    check = install.run("fluence", "plugins", "--check", check=False,
                        **({"FLUENCE_FLUXION_LIB": library} if library else {}))
    if library:
        assert check.returncode == 0, check.stderr
    else:  # no flux-sched here: the Fluxion matcher alone says it is inactive, and why
        assert check.returncode == 2
        assert check.stderr.startswith("error: plugins not working: fluxion (inactive: ")
        assert ";" not in check.stderr
    stage = install.run("fluence", "stage", install.work / "all")
    assert stage.stdout.startswith("staged ")
    staged = stage.stdout.split(" into ")[0].removeprefix("staged ").split(", ")
    assert sorted(staged) == ["braket", "qrmi"]
    for provider in ("braket", "qrmi"):
        interceptor = install.work / "all" / "fluence_staged" / "interceptors" / f"{provider}.py"
        assert interceptor.is_file()


def test_the_installed_scheduler_runs_against_a_real_api_server(
    install: Install, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The wheel's ``fluence up`` on an API server with nothing of Fluence applied."""
    assets, reason = find_assets()
    if assets is None:
        pytest.skip(reason)
    with start_apiserver(assets, tmp_path_factory.mktemp("apiserver")) as server:
        kube = server.cluster(qps=1000, burst=1000)
        namespace = ensure_namespace(kube, "wheel")
        kube.create("nodes", {"metadata": {"name": "wheel-node"}, "status": {
            "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"}}})
        log = install.work / "up.log"
        environment = {k: v for k, v in os.environ.items() if not k.startswith("FLUENCE_")}
        environment.pop("KUBERNETES_SERVICE_HOST", None)
        environment.update(KUBECONFIG=str(server.kubeconfig()), POD_NAME="wheel",
                           PATH=f"{install.root / 'bin'}:{environment.get('PATH', '')}",
                           FLUENCE_METRICS_PORT=str(free_port()))
        with log.open("wb") as sink:
            process = subprocess.Popen(["fluence", "up"], cwd=install.work, env=environment,
                                       stdout=sink, stderr=sink)
        try:
            kube.create("pods", {"metadata": {"name": "p"}, "spec": {
                "schedulerName": names.SCHEDULER_NAME,
                "containers": [{"name": "c", "image": "busybox",
                                "resources": {"requests": {"cpu": "1"}}}]}}, namespace)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and process.poll() is None:
                if kube.get("pods", "p", namespace)["spec"].get("nodeName"):
                    break
                time.sleep(0.5)
            assert kube.get("pods", "p", namespace)["spec"].get("nodeName") == "wheel-node", \
                log.read_text()[-3000:]
            lease = kube.get("leases", "fluence-scheduler", names.KUBE_SYSTEM)
            assert lease is not None and lease["spec"]["holderIdentity"] == "wheel"
        finally:
            process.terminate()
            process.wait(timeout=60)
            kube.close()
