"""The scout's report endpoint over real HTTPS: who may report, and what a report does."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from fluence_core import names
from fluence_core.kube.fake import FakeCluster
from fluence_core.hybrid.reporter import HttpsReporter, ReportError
from fluence_core.settings import Settings
from fluence_core.webhook.transport import tls
from fluence_core.hybrid.endpoint import ReportEndpoint
from fluence_core.webhook.transport.routes import Routes
from fluence_core.webhook.transport.server import WebhookServer, server_context

from .scouts import GATE, JOB, gates, job_qj, split_member, stored

@pytest.fixture
def cluster() -> FakeCluster:
    fake = job_qj()
    fake.create("pods", split_member("other-1", names.ROLE_WORKER, gated=True, group="other"))
    fake.create("pods", split_member("foreign-1", names.ROLE_WORKER, gated=True, owners=[
        {**JOB[0], "uid": "another-job"}]))
    return fake


@pytest.fixture
def served(tmp_path: Path, cluster: FakeCluster):
    cert = tls.generate(["localhost"], tmp_path / "tls", ip_addresses=["127.0.0.1"])
    settings = Settings()
    server = WebhookServer(
        ("127.0.0.1", 0), Routes([ReportEndpoint(cluster, settings)]),
        ssl_context=server_context(str(cert.cert_file), str(cert.key_file)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    yield server, cert.ca_pem.decode()
    server.shutdown()
    server.server_close()


def reporter(served, tmp_path: Path, token: str) -> HttpsReporter:
    server, ca = served
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    return HttpsReporter(f"https://localhost:{server.port}{names.REPORT_PATH}", token_file, ca)


RELEASE = {"status": "ready", "jobId": "task-1", "session": "sess-1"}


def test_the_scouts_release_report_stamps_and_ungates_only_its_workers(
    served, cluster, tmp_path
) -> None:
    token = cluster.issue_token(stored(cluster, "qj-0"), "fluence")
    reply = reporter(served, tmp_path, token).report("release", RELEASE)
    assert reply == {"ok": True, "ungated": ["qj-1", "qj-2"], "running": ["qj-1", "qj-2"]}
    for name in ("qj-1", "qj-2"):
        assert gates(cluster, name) == ["example.org/other"]  # only Fluence's gate goes
        stamped = stored(cluster, name)["metadata"]["annotations"]
        assert stamped[names.SCOUT_JOB_ID_ANNOTATION] == "task-1"
        assert stamped[names.SCOUT_SESSION_ANNOTATION] == "sess-1"
        assert stamped[names.BACKEND_ANNOTATION] == "sim_qpu"
        assert stamped[names.attr_annotation("provider")] == "fake"
    assert gates(cluster, "other-1") == ["example.org/other", GATE]  # another group
    assert gates(cluster, "foreign-1") == ["example.org/other", GATE]  # another Job's pod
    scout = stored(cluster, "qj-0")["metadata"]["annotations"]
    assert scout[names.SCOUT_STATUS_ANNOTATION] == "ready"
    again = reporter(served, tmp_path, token).report("release", RELEASE)
    assert again["ungated"] == [] and again["running"] == ["qj-1", "qj-2"]


def test_found_and_final_reports_annotate_the_scout(served, cluster, tmp_path) -> None:
    token = cluster.issue_token(stored(cluster, "qj-0"), "fluence")
    client = reporter(served, tmp_path, token)
    assert client.report("found", {"jobId": "task-1", "position": 4}) == {"ok": True}
    notes = stored(cluster, "qj-0")["metadata"]["annotations"]
    assert notes[names.SCOUT_QUEUE_POSITION_ANNOTATION] == "4"
    assert notes[names.SCOUT_JOB_ID_ANNOTATION] == "task-1"
    client.report("final", {"status": "observed", "workersFinished": False})
    notes = stored(cluster, "qj-0")["metadata"]["annotations"]
    assert notes[names.SCOUT_STATUS_ANNOTATION] == "observed"
    assert gates(cluster, "qj-1") == ["example.org/other", GATE]  # nobody released


def refused(served, tmp_path, token: str, caplog, status: int, words: str) -> None:
    caplog.set_level(logging.WARNING, logger=names.LOGGER_NAME)
    with pytest.raises(ReportError) as raised:
        reporter(served, tmp_path, token).report("release", RELEASE)
    assert f"({status})" in str(raised.value)
    assert any("scout report refused" in r.getMessage() and words in r.getMessage()
               for r in caplog.records)  # the reason in the log; the body says less


def test_a_workers_token_is_refused_and_nothing_changes(served, cluster, tmp_path, caplog):
    token = cluster.issue_token(stored(cluster, "qj-1"), "fluence")
    refused(served, tmp_path, token, caplog, 403, "is not the scout of a shared group")
    assert gates(cluster, "qj-2") == ["example.org/other", GATE]


def test_a_token_for_another_audience_is_refused(served, cluster, tmp_path, caplog):
    token = cluster.issue_token(stored(cluster, "qj-0"), "https://kubernetes.default.svc")
    refused(served, tmp_path, token, caplog, 401, "not valid for audience 'fluence'")
    assert gates(cluster, "qj-1") == ["example.org/other", GATE]


def test_a_made_up_token_is_refused(served, cluster, tmp_path, caplog):
    refused(served, tmp_path, "not-a-token", caplog, 401, "invalid bearer token")


def test_a_token_of_a_deleted_scout_is_refused(served, cluster, tmp_path, caplog):
    token = cluster.issue_token(stored(cluster, "qj-0"), "fluence")
    cluster.delete("pods", "qj-0", "default")
    # the same name, a new uid
    cluster.create("pods", split_member("qj-0", names.ROLE_SCOUT, sidecar=True))
    refused(served, tmp_path, token, caplog, 401, "gone")


def test_a_scout_running_as_another_account_is_refused(cluster) -> None:
    scout = stored(cluster, "qj-0")
    token = cluster.issue_token({**scout, "spec": {**scout["spec"],
                                                  "serviceAccountName": "ci-deployer"}}, "fluence")
    reply = ReportEndpoint(cluster, Settings()).handle(f"Bearer {token}", b'{"event": "found"}')
    assert reply.status == 403 and "does not run as" in reply.body["error"]


def test_a_pod_labelled_scout_without_the_injected_sidecar_is_refused(cluster) -> None:
    cluster.create("pods", split_member("forged", names.ROLE_SCOUT))
    token = cluster.issue_token(stored(cluster, "forged"), "fluence")
    reply = ReportEndpoint(cluster, Settings()).handle(f"Bearer {token}", b'{"event": "found"}')
    assert reply.status == 403 and reply.body["code"] == 403


@pytest.mark.parametrize("authorization", [None, "", "Basic abc", "Bearer "])
def test_no_bearer_token_is_401(cluster, authorization) -> None:
    reply = ReportEndpoint(cluster, Settings()).handle(authorization, b'{"event": "found"}')
    assert reply.status == 401 and "Bearer" in reply.body["error"]


@pytest.mark.parametrize("body, words", [
    (b"[", "bad report"),
    (b"[]", "JSON object"),
    (b"[" * 10_000, "nests too deeply"),
    (b'{"a": ' * 5_000, "nests too deeply"),
    (b"\xff\xfe", "bad report"),
    (b'{"event": "found", "position": 1' + b"0" * 5_000 + b"}", "bad report"),
    (b'{"event": "launch"}', "'event'"),
    (b'{"event": "release"}', "'status'"),
    (b'{"event": "release", "status": "observed"}', "'status'"),
    (b'{"event": "found", "position": -1}', "'position'"),
    (b'{"event": "found", "position": true}', "'position'"),
    (b'{"event": "found", "jobId": 7}', "'jobId'"),
    (b'{"event": "final", "status": "ready", "workersFinished": "yes"}', "'workersFinished'"),
])
def test_a_bad_report_is_400_naming_the_field(cluster, body, words) -> None:
    token = cluster.issue_token(stored(cluster, "qj-0"), "fluence")
    reply = ReportEndpoint(cluster, Settings()).handle(f"Bearer {token}", body)
    assert reply.status == 400 and words in reply.body["error"], reply.body


def test_an_unexpected_failure_is_a_500_in_json_and_logged(cluster, caplog) -> None:
    token = cluster.issue_token(stored(cluster, "qj-0"), "fluence")

    class Broken:
        def __getattr__(self, verb: str) -> Any:
            return getattr(cluster, verb)

        def get(self, *args: Any, **kwargs: Any) -> Any:
            raise TypeError("a bug")

    reply = ReportEndpoint(Broken(), Settings()).handle(f"Bearer {token}", b'{"event": "found"}')
    assert reply.status == 500 and reply.body == {
        "error": "fluence failed on this report (TypeError); send it again", "code": 500}
    assert "unexpected failure" in caplog.text and "a bug" in caplog.text


def test_the_report_port_serves_no_admission_review(served) -> None:
    import http.client
    import ssl

    server, ca = served
    conn = http.client.HTTPSConnection("localhost", server.port, timeout=5,
                                       context=ssl.create_default_context(cadata=ca))
    conn.request("POST", "/mutate", body=b"{}", headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 404
    assert json.loads(response.read()) == {
        "error": "nothing is served at '/mutate' on this port", "code": 404}
