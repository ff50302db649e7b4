"""deploy/quantum-priority-policy.yaml says what fluence_core.names says.

The policy runs in the API server (CEL) and cannot import Python, so the names it checks
are written out; this keeps them equal to names.py. What the policy does is tested on a
real API server: tests/e2e/test_quantum_priority_e2e.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from fluence_core import names

POLICY = Path(__file__).resolve().parent.parent / "deploy" / "quantum-priority-policy.yaml"


def _documents() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(POLICY.read_text()) if d]


def _variable(name: str) -> str:
    policy = next(d for d in _documents() if d["kind"] == "ValidatingAdmissionPolicy")
    return str(next(v["expression"] for v in policy["spec"]["variables"] if v["name"] == name))


def _strings(expression: str) -> list[str]:
    return re.findall(r"'([^']*)'", expression)


def test_the_class_and_the_gate_are_names_py() -> None:
    assert _strings(_variable("priorityClass")) == [names.QUANTUM_PRIORITY_CLASS]
    assert _strings(_variable("gate")) == [names.QUANTUM_GATE]


def test_the_seal_the_marks_and_the_role_are_names_py() -> None:
    assert _strings(_variable("sealed")) == [names.SPLIT_SEAL_ANNOTATION]
    assert _strings(_variable("marks")) == [names.PROTECTED_ANNOTATION,
                                            names.PROMISED_CORES_ANNOTATION]
    assert names.ROLE_LABEL in _strings(_variable("role"))


def test_only_fluences_own_service_accounts_lift_the_gate() -> None:
    assert _strings(_variable("fluence")) == list(names.FLUENCE_USERS)


def test_the_policy_is_in_the_kustomization_with_its_binding() -> None:
    kustomization = yaml.safe_load((POLICY.parent / "kustomization.yaml").read_text())
    assert POLICY.name in kustomization["resources"]
    assert [d["kind"] for d in _documents()] == ["ValidatingAdmissionPolicy",
                                                 "ValidatingAdmissionPolicyBinding"]
