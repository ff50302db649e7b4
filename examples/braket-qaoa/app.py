"""Max-cut QAOA on AWS Braket as one Fluence scout/worker group (coordination: shared).

The scout (``FLUENCE_ROLE=scout``) submits the depth-1 QAOA circuit for the
starting angles; Fluence's interceptor tags the task with the pod uid, the
sidecar watches its queue position and ungates the workers when it is about to
run, stamping the task ARN on them (``FLUENCE_SCOUT_JOB_ID``). Each worker
fetches that result by ARN and scores a slice of the angle grid classically
around it, so classical nodes are held only while the QPU result is near.

Without AWS credentials (or with ``--local``) everything runs on the SDK's
``LocalSimulator`` (``FLUXION_LOCAL_SIMULATOR`` names which, ``braket_sv`` by
default): the interceptor still tags the task and records it for the sidecar,
which releases the workers at once with its id. A local task lives only in the
scout's process, so a worker recomputes the scout's circuit on its own
simulator instead of fetching the result by ARN.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys

EDGES = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2)]
NODES = 4


def qaoa_circuit(gamma: float, beta: float):  # type: ignore[no-untyped-def]
    from braket.circuits import Circuit

    circuit = Circuit()
    for q in range(NODES):
        circuit.h(q)
    for a, b in EDGES:
        circuit.cnot(a, b).rz(b, 2 * gamma).cnot(a, b)
    for q in range(NODES):
        circuit.rx(q, 2 * beta)
    return circuit


def cut_value(bits: str) -> int:
    return sum(1 for a, b in EDGES if bits[a] != bits[b])


def expected_cut(counts: dict[str, int]) -> float:
    shots = sum(counts.values())
    return sum(cut_value(bits) * n for bits, n in counts.items()) / shots


def aws_credentials() -> bool:
    """Whether boto3's chain finds credentials (env, files, web identity, instance role)."""
    try:
        import boto3

        return boto3.Session().get_credentials() is not None
    except Exception:
        return False


def device(local: bool):  # type: ignore[no-untyped-def]
    if local:
        from braket.devices import LocalSimulator

        return LocalSimulator(os.environ.get("FLUXION_LOCAL_SIMULATOR") or "braket_sv")
    from braket.aws import AwsDevice

    return AwsDevice(os.environ["FLUXION_ARN"])


def tags_of(task) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """The task's tags: the service's record on AWS, the task itself on the local simulator."""
    if hasattr(task, "tags"):  # set on a local task by Fluence's interceptor
        return dict(task.tags or {})
    metadata = task.metadata() if hasattr(task, "metadata") else None
    return dict((metadata or {}).get("tags") or {})


def scout(args: argparse.Namespace) -> int:
    task = device(args.local).run(qaoa_circuit(args.gamma, args.beta), shots=args.shots)
    print(json.dumps({"role": "scout", "task": task.id, "tags": tags_of(task),
                      "backend": os.environ.get("FLUXION_BACKEND")}))
    counts = task.result().measurement_counts
    best = max(counts, key=cut_value)
    print(
        json.dumps(
            {"expected_cut": expected_cut(counts), "best_bits": best, "cut": cut_value(best)}
        )
    )
    return 0


def scout_counts(job_id: str, args: argparse.Namespace) -> tuple[dict[str, int], str]:
    """The scout's measurement counts: by ARN from Braket, or recomputed for a local task."""
    if job_id.startswith("arn:"):
        from braket.aws import AwsQuantumTask

        return dict(AwsQuantumTask(job_id).result().measurement_counts), "fetched by ARN"
    task = device(True).run(qaoa_circuit(args.gamma, args.beta), shots=args.shots)
    return dict(task.result().measurement_counts), "recomputed (local task)"


def worker(args: argparse.Namespace) -> int:
    job_id = os.environ.get("FLUENCE_SCOUT_JOB_ID", "")
    status = os.environ.get("FLUENCE_SCOUT_STATUS", "ready")
    if not job_id or status != "ready":
        print(json.dumps({"role": "worker", "error": f"scout has no result ({status})"}))
        return 1
    counts, how = scout_counts(job_id, args)  # the shared job id
    index, size = (
        int(os.environ.get("JOB_COMPLETION_INDEX", "1")),
        int(os.environ.get("FLUENCE_GROUP_SIZE", "2")),
    )
    grid = list(itertools.product([i * math.pi / 8 for i in range(8)], repeat=2))
    mine = grid[index - 1::max(size - 1, 1)]
    # Classical refinement: score each angle pair by its exact expectation with a statevector.
    from braket.devices import LocalSimulator

    sim = LocalSimulator()
    scored = [
        (expected_cut(sim.run(qaoa_circuit(g, b), shots=256).result().measurement_counts), g, b)
        for g, b in mine
    ]
    best = max(scored)
    print(json.dumps({"role": "worker", "scout_task": job_id, "scout_result": how,
                      "scout_cut": expected_cut(counts), "best": best,
                      "backend": os.environ.get("FLUXION_BACKEND")}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--role", default=os.environ.get("FLUENCE_ROLE", "scout"))
    parser.add_argument("--gamma", type=float, default=0.8)
    parser.add_argument("--beta", type=float, default=0.4)
    parser.add_argument("--shots", type=int, default=200)
    parser.add_argument("--local", action="store_true", help="Braket local simulator, no AWS")
    args = parser.parse_args(argv)
    if not args.local and not aws_credentials():
        args.local = True
        print("no AWS credentials: running on the Braket local simulator", file=sys.stderr)
    if not args.local and "FLUXION_ARN" not in os.environ and args.role == "scout":
        print("needs FLUXION_ARN (set by Fluence from the resources config) beside AWS "
              "credentials; try --local", file=sys.stderr)
        return 2
    return scout(args) if args.role == "scout" else worker(args)


if __name__ == "__main__":
    raise SystemExit(main())
