"""Time building the 1000-node x 64-core resource graph and exporting its JGF.

A plain script, repeatable: ``python benchmarks/bench_graph.py [--nodes N]
[--cores C] [--repeat R]``. It writes a ``kubectl get nodes -o yaml``-style
List to a temporary file and times, best of R runs each:

* parse: reading the Node YAML into NodeInfo objects;
* build: ResourceGraph over those nodes plus config/resources.yaml;
* cli:   ``fluence graph --nodes FILE --resources config/resources.yaml``
         end to end, in process (parse + build + summary table);
* jgf:   ResourceGraph.jgf_text() (the JSON text Fluxion loads), against the
         way ``fluence graph --jgf`` wrote it before (a streaming ``json.dump``
         of the JGF dict), measured in the same run;
* jgf cli: ``fluence graph --jgf`` as a user runs it (a fresh process, output
         to /dev/null), wall and CPU seconds.

It prints the figures and the vertex count. Timing lives here, not in tests.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Callable

import yaml

from fluence_core.graph import ResourceGraph
from fluence_core.kube.manifests import read_objects
from fluence_core.models import NodeInfo
from fluence_core.resource_config import load_resource_config

ROOT = Path(__file__).resolve().parent.parent
RESOURCES = ROOT / "config" / "resources.yaml"


def node_list(count: int, cores: int, memory: str = "256Gi") -> dict[str, Any]:
    """A Kubernetes NodeList of ``count`` identical nodes."""
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": f"node-{i:04d}",
                    "labels": {"kubernetes.io/hostname": f"node-{i:04d}"},
                },
                "spec": {},
                "status": {"allocatable": {"cpu": str(cores), "memory": memory, "pods": "110"}},
            }
            for i in range(count)
        ],
    }


def best_of(repeat: int, action: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--cores", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from typer.testing import CliRunner

    from fluence_core.cli import app

    with tempfile.TemporaryDirectory() as tmp:
        nodes_file = Path(tmp) / "nodes.yaml"
        nodes_file.write_text(yaml.safe_dump(node_list(args.nodes, args.cores), sort_keys=False))
        config = load_resource_config(RESOURCES)

        parse_s, infos = best_of(
            args.repeat, lambda: [NodeInfo.from_kube(o) for o in read_objects(nodes_file, "Node")]
        )
        build_s, graph = best_of(args.repeat, lambda: ResourceGraph(infos, config))
        text_s, text = best_of(args.repeat, graph.jgf_text)
        jgf = json.loads(text)

        def streamed() -> None:
            with open(os.devnull, "w") as sink:
                json.dump(jgf, sink, separators=(",", ":"))

        stream_s, _ = best_of(max(1, args.repeat // 2), streamed)

        runner = CliRunner()
        argv = ["graph", "--nodes", str(nodes_file), "--resources", str(RESOURCES)]

        def cli() -> int:
            with redirect_stderr(io.StringIO()), redirect_stdout(io.StringIO()):
                result = runner.invoke(app, argv)
            if result.exit_code != 0:
                raise SystemExit(f"fluence graph failed: {result.output}")
            return result.exit_code

        cli_s, _ = best_of(args.repeat, cli)
        command = [sys.executable, "-m", "fluence_core.cli", "graph", "--nodes", str(nodes_file),
                   "--resources", str(RESOURCES), "--jgf"]

        def jgf_cli() -> float:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            with open(os.devnull, "w") as sink:
                subprocess.run(command, stdout=sink, stderr=subprocess.DEVNULL, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

        jgf_cli_s, jgf_cli_cpu = best_of(args.repeat, jgf_cli)

    print(
        f"graph {args.nodes} nodes x {args.cores} cores (+ {RESOURCES.name}), best of {args.repeat}"
    )
    print(f"  vertices            {graph.vertex_count():>10,}")
    print(
        f"  JGF vertices/edges  {len(jgf['graph']['nodes']):>10,} / {len(jgf['graph']['edges']):,}"
    )
    print(f"  JGF size            {len(text) / 2**20:>10.1f} MiB")
    print(f"  parse node YAML     {parse_s * 1000:>10.1f} ms")
    print(f"  build graph         {build_s * 1000:>10.1f} ms")
    print(f"  fluence graph (CLI) {cli_s * 1000:>10.1f} ms")
    print(f"  jgf_text()          {text_s * 1000:>10.1f} ms")
    print(f"  json.dump streamed  {stream_s * 1000:>10.1f} ms  (how --jgf wrote it before; "
          f"{stream_s / text_s:.1f}x jgf_text)")
    print(f"  fluence graph --jgf {jgf_cli_s * 1000:>10.1f} ms wall, "
          f"{jgf_cli_cpu * 1000:.0f} ms CPU (fresh process)")


if __name__ == "__main__":
    main()
