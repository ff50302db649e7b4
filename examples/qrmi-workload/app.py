"""A Bell circuit in a session on the backend Fluence chose (``FLUXION_BACKEND``).

Workers of a shared group submit into the scout's session
(``FLUENCE_SCOUT_SESSION``). Without a token (or with ``--local``) the same code
runs in qiskit-ibm-runtime's local testing mode on a fake backend:
``FLUXION_FAKE_BACKEND`` (the backend's ``fake-backend`` attribute) names it,
``FakeManilaV2`` by default.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

NEEDS = {
    "FLUXION_BACKEND": "the backend Fluence placed the pod on (set by the scheduler)",
    "QISKIT_IBM_TOKEN": "an IBM Quantum API key (Secret key `token`)",
    "QISKIT_IBM_INSTANCE": "the IBM Cloud instance CRN (Secret key `crn`)",
}
DEFAULT_FAKE = "FakeManilaV2"


def bell():  # type: ignore[no-untyped-def]
    from qiskit import QuantumCircuit

    circuit = QuantumCircuit(2)
    circuit.h(0)
    circuit.cx(0, 1)
    circuit.measure_all()
    return circuit


def backend_and_service(local: bool):  # type: ignore[no-untyped-def]
    if local:
        from qiskit_ibm_runtime import fake_provider

        return getattr(fake_provider, os.environ.get("FLUXION_FAKE_BACKEND") or DEFAULT_FAKE)()
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
    if not args.local and "QISKIT_IBM_TOKEN" in missing:
        args.local = True
        print("no QISKIT_IBM_TOKEN: qiskit-ibm-runtime local testing mode on a fake backend",
              file=sys.stderr)
    elif missing and not args.local:
        print("qrmi-workload opens a session on $FLUXION_BACKEND; it also needs:",
              file=sys.stderr)
        for key in missing:
            print(f"  {key}: {NEEDS[key]}", file=sys.stderr)
        return 2
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
    print(json.dumps({"backend": backend.name, "local": args.local,
                      "session": session.session_id, "job": job.job_id(), "counts": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
