"""A Bell circuit in a session on the backend Fluence chose (``FLUXION_BACKEND``).

Workers of a shared group submit into the scout's session
(``FLUENCE_SCOUT_SESSION``). Without credentials it prints what it would need
and exits 0; ``--local`` runs the same code on a qiskit-ibm-runtime fake backend.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

NEEDS = {
    "FLUXION_BACKEND": "the backend Fluence placed the pod on (set by the scheduler)",
    "QISKIT_IBM_TOKEN": "an IBM Quantum API key (or a saved account)",
    "QISKIT_IBM_INSTANCE": "the IBM Cloud instance CRN",
}


def bell():  # type: ignore[no-untyped-def]
    from qiskit import QuantumCircuit

    circuit = QuantumCircuit(2)
    circuit.h(0)
    circuit.cx(0, 1)
    circuit.measure_all()
    return circuit


def backend_and_service(local: bool):  # type: ignore[no-untyped-def]
    if local:
        from qiskit_ibm_runtime.fake_provider import FakeManilaV2

        return FakeManilaV2()
    from qiskit_ibm_runtime import QiskitRuntimeService

    service = QiskitRuntimeService(
        channel="ibm_quantum_platform",
        token=os.environ["QISKIT_IBM_TOKEN"],
        instance=os.environ["QISKIT_IBM_INSTANCE"],
    )
    return service.backend(os.environ["FLUXION_BACKEND"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--local", action="store_true", help="fake backend, no account")
    parser.add_argument("--shots", type=int, default=1000)
    args = parser.parse_args(argv)
    missing = [k for k in NEEDS if not os.environ.get(k)]
    if missing and not args.local:
        print(
            "qrmi-workload would open a session on $FLUXION_BACKEND and run a Bell circuit; "
            "it needs:"
        )
        for key in missing:
            print(f"  {key}: {NEEDS[key]}")
        print("(or run with --local for a fake backend)")
        return 0
    from qiskit.transpiler.preset_passmanagers import generate_preset_pass_manager
    from qiskit_ibm_runtime import SamplerV2, Session

    backend = backend_and_service(args.local)
    circuit = generate_preset_pass_manager(backend=backend, optimization_level=1).run(bell())
    joined = os.environ.get("FLUENCE_SCOUT_SESSION")
    session = (
        Session.from_id(joined, service=backend.service)
        if joined and not args.local
        else Session(backend=backend)
    )
    with session:
        job = SamplerV2(mode=session).run([circuit], shots=args.shots)
        counts = job.result()[0].data.meas.get_counts()
    print(json.dumps({"backend": backend.name, "session": session.session_id, "job": job.job_id(),
                      "counts": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
