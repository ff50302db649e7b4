"""deploy/admission-policy.yaml says what fluence_core.names says: one fact, two spellings.

The policy runs in the API server (CEL) and cannot import Python, so its key lists and
usernames are written out; this keeps them equal to names.py. What the policy does is
tested on a real API server: tests/e2e/test_admission_policy_e2e.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from fluence_core import names

POLICY = Path(__file__).resolve().parent.parent / "deploy" / "admission-policy.yaml"


def _policy() -> dict:
    documents = [d for d in yaml.safe_load_all(POLICY.read_text()) if d]
    return next(d for d in documents if d["kind"] == "ValidatingAdmissionPolicy")


def _strings(expression: str) -> list[str]:
    return re.findall(r"'([^']*)'", expression)


def _variable(name: str) -> str:
    return next(v["expression"] for v in _policy()["spec"]["variables"] if v["name"] == name)


def test_the_policys_scheduler_only_keys_and_prefixes_are_names_py() -> None:
    assert _strings(_variable("schedulerOnly")) == list(names.SCHEDULER_ONLY_ANNOTATIONS)
    assert _strings(_variable("prefixes")) == list(names.SCHEDULER_ONLY_PREFIXES)


def test_the_policys_owned_keys_are_names_py() -> None:
    extra = _strings(_variable("owned"))
    assert [*names.SCHEDULER_ONLY_ANNOTATIONS, *extra] == list(names.OWNED_ANNOTATIONS)
    assert names.ROLE_LABEL in _variable("newRole") and names.ROLE_LABEL in _variable("oldRole")


def test_only_fluences_own_service_accounts_are_exempt() -> None:
    condition = _policy()["spec"]["matchConditions"][0]["expression"]
    assert _strings(condition) == list(names.FLUENCE_USERS)


def test_the_policy_is_in_the_kustomization_with_its_binding() -> None:
    kustomization = yaml.safe_load((POLICY.parent / "kustomization.yaml").read_text())
    assert POLICY.name in kustomization["resources"]
    kinds = [d["kind"] for d in yaml.safe_load_all(POLICY.read_text()) if d]
    assert kinds == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
