"""KubeCluster at the HTTP level, against kmock (an HTTP/Kubernetes mock server).

These tests pin down what goes over the wire — paths, verbs, content types,
bodies — and how answers map back (errors, 410 re-lists, bookmarks), without a
real API server. kmock is asyncio-based and the kubernetes client is
synchronous, so the mock runs on its own event loop in a background thread.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import kmock
import pytest

from fluence_core.kube.api import ADDED, RESYNC, Cancellation, ClusterAPI
from fluence_core.kube.client import KubeCluster, TokenBucket, _lines
from fluence_core.kube.errors import ApiError, Conflict, Gone, NotFound

TOKEN = "test-token"


class MockServer:
    """A kmock handler served from a background thread, with the requests it saw."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)
        self.handler: Any = None
        self.url = ""

    async def _serve(self) -> None:
        async with kmock.RawHandler() as handler, kmock.Server(handler) as server:
            self.handler, self.url = handler, str(server.url)
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> Self:
        self._thread.start()
        assert self._ready.wait(10), "kmock did not start"
        return self

    def __exit__(self, *_: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    def on(self, criteria: str, reply: Any) -> None:
        """React to requests matching ``criteria`` ("verb /path") with ``reply``."""
        self.handler[criteria] << reply

    @property
    def requests(self) -> list[Any]:
        return list(self.handler)


def status(code: int, reason: str, message: str = "") -> Any:
    return kmock.Response(status=code, payload={
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
        "reason": reason, "message": message or reason})


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer() as running:
        yield running


@pytest.fixture
def kube(server: MockServer) -> Iterator[KubeCluster]:
    cluster = KubeCluster.from_token(server.url, TOKEN, qps=1000, burst=1000)
    yield cluster
    cluster.close()


def test_kube_cluster_satisfies_the_protocol(kube: KubeCluster) -> None:
    api: ClusterAPI = kube
    assert isinstance(api, ClusterAPI)


def test_requests_carry_the_bearer_token(server: MockServer, kube: KubeCluster) -> None:
    server.on("get /api/v1/nodes/n1", {"kind": "Node", "metadata": {"name": "n1"}})
    assert kube.get("nodes", "n1") == {"kind": "Node", "metadata": {"name": "n1"}}
    assert server.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"


def test_kubeconfig_current_context_is_used(server: MockServer, tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: mock\n"
        f"clusters: [{{name: mock, cluster: {{server: '{server.url}'}}}}]\n"
        "users: [{name: u, user: {token: from-kubeconfig}}]\n"
        "contexts: [{name: mock, context: {cluster: mock, user: u}}]\n")
    server.on("get /api/v1/nodes/n1", {"kind": "Node", "metadata": {"name": "n1"}})
    KubeCluster.from_kubeconfig(config).get("nodes", "n1")
    assert server.requests[0].headers["Authorization"] == "Bearer from-kubeconfig"


def test_bind_posts_a_binding_to_the_subresource(server: MockServer, kube: KubeCluster) -> None:
    # The server answers a binding with a Status, which the typed client cannot
    # hold; the wrapper must not care.
    server.on("post /api/v1/namespaces/ns/pods/p1/binding",
              kmock.Response(status=201, payload={"kind": "Status", "status": "Success",
                                                  "code": 201}))
    kube.bind("ns", "p1", "n1", uid="u-1")
    [request] = server.requests
    assert request.data == {
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": "p1", "namespace": "ns", "uid": "u-1"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}


def test_second_binding_maps_to_conflict(server: MockServer, kube: KubeCluster) -> None:
    server.on("post /api/v1/namespaces/ns/pods/p1/binding",
              status(409, "Conflict", 'pod p1 is already assigned to node "n1"'))
    with pytest.raises(Conflict, match="already assigned"):
        kube.bind("ns", "p1", "n2")


def test_merge_patch_uses_the_merge_patch_content_type(server: MockServer,
                                                       kube: KubeCluster) -> None:
    server.on("patch /api/v1/namespaces/ns/pods/p1", {"kind": "Pod"})
    kube.patch("pods", "p1", {"metadata": {"annotations": {"a": "b"}}}, "ns")
    [request] = server.requests
    assert request.headers["Content-Type"] == "application/merge-patch+json"
    assert request.data == {"metadata": {"annotations": {"a": "b"}}}


def test_json_patch_sends_a_list_with_the_json_patch_content_type(
        server: MockServer, kube: KubeCluster) -> None:
    server.on("patch /api/v1/namespaces/ns/pods/p1", {"kind": "Pod"})
    operations = [{"op": "remove", "path": "/spec/schedulingGates/0"}]
    kube.patch("pods", "p1", operations, "ns", patch_type="json")
    [request] = server.requests
    assert request.headers["Content-Type"] == "application/json-patch+json"
    assert request.data == operations


def test_patch_status_goes_to_the_status_subresource(server: MockServer,
                                                     kube: KubeCluster) -> None:
    server.on("patch /apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups/g/status",
              {"kind": "PodGroup"})
    kube.patch_status("podgroups", "g", {"status": {"conditions": []}}, "ns")
    assert len(server.requests) == 1


def test_podgroup_create_and_get_use_the_v1alpha2_path(server: MockServer,
                                                      kube: KubeCluster) -> None:
    path = "/apis/scheduling.k8s.io/v1alpha2/namespaces/ns/podgroups"
    server.on(f"post {path}", lambda request: request.data)
    server.on(f"get {path}/g", {"kind": "PodGroup", "metadata": {"name": "g"}})
    body = {"metadata": {"name": "g"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}
    created = kube.create("podgroups", body, "ns")
    assert created["apiVersion"] == "scheduling.k8s.io/v1alpha2"
    assert created["kind"] == "PodGroup"
    assert created["spec"] == body["spec"]
    assert kube.get("podgroups", "g", "ns") == {"kind": "PodGroup", "metadata": {"name": "g"}}


def test_create_takes_the_namespace_from_the_body(server: MockServer, kube: KubeCluster) -> None:
    server.on("post /api/v1/namespaces/team/pods", lambda request: request.data)
    kube.create("pods", {"metadata": {"name": "p", "namespace": "team"}})
    assert len(server.requests) == 1


def test_get_of_a_missing_object_is_none(server: MockServer, kube: KubeCluster) -> None:
    server.on("get /api/v1/namespaces/ns/pods/nope", status(404, "NotFound"))
    assert kube.get("pods", "nope", "ns") is None


@pytest.mark.parametrize(("code", "reason", "error"), [
    (404, "NotFound", NotFound), (409, "AlreadyExists", Conflict), (410, "Expired", Gone),
    (422, "Invalid", ApiError), (500, "InternalError", ApiError),
])
def test_error_statuses_map_to_our_exceptions(server: MockServer, kube: KubeCluster, code: int,
                                              reason: str, error: type[ApiError]) -> None:
    server.on("post /api/v1/namespaces/ns/pods", status(code, reason, "told you so"))
    with pytest.raises(error) as caught:
        kube.create("pods", {"metadata": {"name": "p"}}, "ns")
    assert type(caught.value) is error
    assert (caught.value.status, caught.value.reason, caught.value.message) == (
        code, reason, "told you so")


def test_unreachable_server_is_an_api_error_with_status_zero() -> None:
    kube = KubeCluster.from_token("http://127.0.0.1:9", TOKEN)
    with pytest.raises(ApiError) as caught:
        kube.get("nodes", "n1")
    assert caught.value.status == 0


def test_delete_passes_the_grace_period_and_reports_absence(server: MockServer,
                                                            kube: KubeCluster) -> None:
    server.on("delete /api/v1/namespaces/ns/pods/p1", {"kind": "Pod"})
    server.on("delete /api/v1/namespaces/ns/pods/p2", status(404, "NotFound"))
    assert kube.delete("pods", "p1", "ns", grace_period_seconds=0) is True
    assert kube.delete("pods", "p2", "ns") is False
    assert server.requests[0].params == {"gracePeriodSeconds": "0"}


def test_list_passes_selectors_and_follows_continue(server: MockServer,
                                                    kube: KubeCluster) -> None:
    def pages(request: Any) -> dict[str, Any]:
        if request.params.get("continue") == "next":
            return {"metadata": {"resourceVersion": "7"},
                    "items": [{"metadata": {"name": "b"}}]}
        return {"metadata": {"resourceVersion": "7", "continue": "next"},
                "items": [{"metadata": {"name": "a"}}]}

    server.on("get /api/v1/pods", pages)
    listing = kube.list("pods", label_selector="g=x",
                        field_selector="spec.schedulerName=fluence")
    assert [p["metadata"]["name"] for p in listing.items] == ["a", "b"]
    assert all(p["kind"] == "Pod" and p["apiVersion"] == "v1" for p in listing.items)
    assert listing.resource_version == "7"
    first = server.requests[0].params
    assert (first["labelSelector"], first["fieldSelector"]) == (
        "g=x", "spec.schedulerName=fluence")


class FakeClock:
    """Virtual time: advances only when told to (or when something sleeps)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _pod_event(kind: str, name: str, rv: str) -> dict[str, Any]:
    return {"type": kind, "object": {"kind": "Pod", "apiVersion": "v1",
                                     "metadata": {"name": name, "resourceVersion": rv}}}


def test_watch_relists_on_410_and_resumes_from_the_list_version(server: MockServer) -> None:
    clock = FakeClock()
    kube = KubeCluster.from_token(server.url, TOKEN, clock=clock, sleep=clock.sleep)

    def pods(request: Any) -> Any:
        params = request.params
        if params.get("watch") != "true":
            return {"metadata": {"resourceVersion": "20"},
                    "items": [{"metadata": {"name": "a", "resourceVersion": "20"}}]}
        if params["resourceVersion"] == "5":  # expired: reported inside the stream
            return ({"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                 "reason": "Expired", "message": "too old"}},)
        if params["resourceVersion"] == "20":
            return ({"type": "BOOKMARK", "object": {"kind": "Pod",
                                                    "metadata": {"resourceVersion": "25"}}},
                    _pod_event("ADDED", "b", "30"))
        clock.now += 100  # the watch from 30 runs past the caller's deadline
        return b""  # an empty stream (an empty tuple would mean 'no reaction')

    server.on("get /api/v1/namespaces/ns/pods", pods)
    events = list(kube.watch("pods", "ns", resource_version="5", timeout=60))
    assert [t for t, _ in events] == [RESYNC, ADDED]
    assert [p["metadata"]["name"] for p in events[0][1]["items"]] == ["a"]
    assert events[0][1]["metadata"]["resourceVersion"] == "20"
    assert events[1][1]["metadata"]["name"] == "b"
    watched = [r.params["resourceVersion"] for r in server.requests if "watch" in r.params]
    assert watched == ["5", "20", "30"]
    assert all(r.params.get("allowWatchBookmarks") == "true"
               for r in server.requests if "watch" in r.params)


def test_watch_relists_when_the_watch_request_itself_is_410(server: MockServer) -> None:
    clock = FakeClock()
    kube = KubeCluster.from_token(server.url, TOKEN, clock=clock, sleep=clock.sleep)

    def later(request: Any) -> bytes:
        clock.now += 100
        return b""

    # A Status returned from a callable would stick to that reaction in kmock,
    # so the 410 gets a reaction of its own (query criteria match partially).
    server.on("get /api/v1/pods?watch=true&resourceVersion=5",
              status(410, "Expired", "too old resource version"))
    server.on("get /api/v1/pods?watch=true&resourceVersion=40", later)
    server.on("get /api/v1/pods", {"metadata": {"resourceVersion": "40"}, "items": []})
    events = list(kube.watch("pods", resource_version="5", timeout=10))
    assert [(t, o["items"]) for t, o in events] == [(RESYNC, [])]


def test_watch_without_a_version_lists_first_and_yields_added(server: MockServer) -> None:
    clock = FakeClock()
    kube = KubeCluster.from_token(server.url, TOKEN, clock=clock, sleep=clock.sleep)

    def nodes(request: Any) -> Any:
        if request.params.get("watch") != "true":
            return {"metadata": {"resourceVersion": "9"},
                    "items": [{"metadata": {"name": "n1", "resourceVersion": "3"}}]}
        clock.now += 100
        return (_pod_event("MODIFIED", "n1", "12"),)

    server.on("get /api/v1/nodes", nodes)
    events = list(kube.watch("nodes", timeout=1))
    assert [(t, o["metadata"]["name"]) for t, o in events] == [("ADDED", "n1"),
                                                               ("MODIFIED", "n1")]
    assert events[0][1]["kind"] == "Node"
    assert server.requests[1].params["resourceVersion"] == "9"
    assert server.requests[1].params["timeoutSeconds"] == "1"


def test_post_event_creates_a_core_event_about_the_object(server: MockServer,
                                                          kube: KubeCluster) -> None:
    server.on("post /api/v1/namespaces/ns/events", lambda request: request.data)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p1", "namespace": "ns", "uid": "u1"}}
    event = kube.post_event(pod, "Warning", "FailedScheduling", "gang g: 3/4 members")
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Pod", "name": "p1",
                                       "namespace": "ns", "uid": "u1", "resourceVersion": ""}
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning", "FailedScheduling", "gang g: 3/4 members")
    assert event["metadata"]["name"].startswith("p1.")
    assert event["source"] == {"component": "fluence"}


def test_token_bucket_allows_a_burst_then_spaces_requests() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=10, burst=3, clock=clock, sleep=clock.sleep)
    waits = [bucket.acquire() for _ in range(5)]
    assert waits[:3] == [0, 0, 0]
    assert waits[3:] == pytest.approx([0.1, 0.1])


def test_token_bucket_refills_while_idle_up_to_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(qps=2, burst=2, clock=clock, sleep=clock.sleep)
    bucket.acquire(), bucket.acquire()
    clock.now += 60
    assert [bucket.acquire(), bucket.acquire()] == [0, 0]
    assert bucket.acquire() == pytest.approx(0.5)


def test_token_bucket_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        TokenBucket(qps=0, burst=1)


def test_every_request_takes_a_token(server: MockServer) -> None:
    clock = FakeClock()
    kube = KubeCluster.from_token(server.url, TOKEN, qps=5, burst=1, clock=clock,
                                  sleep=clock.sleep)
    server.on("get /api/v1/nodes/n1", {"kind": "Node"})
    for _ in range(3):
        kube.get("nodes", "n1")
    assert clock.slept == pytest.approx([0.2, 0.2])


def test_events_take_tokens_from_a_bucket_of_their_own(server: MockServer) -> None:
    clock = FakeClock()
    kube = KubeCluster.from_token(server.url, TOKEN, qps=5, burst=1, clock=clock,
                                  sleep=clock.sleep)
    server.on("post /api/v1/namespaces/ns/events", lambda request: request.data)
    server.on("get /api/v1/nodes/n1", {"kind": "Node"})
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "ns"}}
    kube.post_event(pod, "Normal", "Scheduled", "assigned")
    kube.get("nodes", "n1")
    assert clock.slept == [], "the event did not spend the requests' token"
    kube.post_event(pod, "Normal", "Scheduled", "again")
    assert clock.slept == pytest.approx([0.2])


def test_watch_lines_are_whole_however_the_chunks_fall() -> None:
    events = [json.dumps({"type": "ADDED", "object": {"n": i}}) for i in range(50)]
    text = ("\n".join(events) + "\n\n" + '{"type":"BOOKMARK"}').encode()
    cuts = [0, 3, 4, 200, 201, 1500, len(text) - 5, len(text)]

    class Response:
        def stream(self, amt: Any = None, decode_content: bool = True) -> Iterator[bytes]:
            return (text[a:b] for a, b in itertools.pairwise(cuts))

    assert list(_lines(Response())) == events + ['{"type":"BOOKMARK"}']


def test_connections_asked_for_are_kept_open_in_the_pool(server: MockServer) -> None:
    cluster = KubeCluster.from_token(server.url, TOKEN, connections=64)
    try:
        pool = cluster._api.rest_client.pool_manager
        assert pool.connection_pool_kw["maxsize"] == 64
    finally:
        cluster.close()


def test_fewer_connections_than_the_default_leave_the_default(server: MockServer) -> None:
    cluster = KubeCluster.from_token(server.url, TOKEN, connections=1)
    try:
        assert cluster._api.rest_client.pool_manager.connection_pool_kw["maxsize"] >= 5
    finally:
        cluster.close()


class HeldWatch(BaseHTTPRequestHandler):
    """A watch request answered with one event, then held open without another until the
    test ends, as an API server holds a watch on which nothing changes."""

    protocol_version = "HTTP/1.1"
    release = threading.Event()
    requests = 0

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        type(self).requests += 1
        line = json.dumps(_pod_event("ADDED", "a", "6")).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        self.wfile.flush()
        self.release.wait(30)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_cancelled_watch_closes_its_held_response_at_once() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HeldWatch)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kube = KubeCluster.from_token(f"http://127.0.0.1:{server.server_port}", TOKEN)
    cancel, seen, first = Cancellation(), [], threading.Event()

    def read() -> None:
        for event in kube.watch("pods", "ns", resource_version="5", timeout=None,
                                cancel=cancel):
            seen.append(event)
            first.set()

    reader = threading.Thread(target=read, daemon=True)
    try:
        reader.start()
        assert first.wait(10)
        reader.join(0.1)
        assert reader.is_alive()  # held: waiting for a second event
        cancel.cancel()
        reader.join(1.0)
        assert not reader.is_alive()
        assert [(kind, obj["metadata"]["name"]) for kind, obj in seen] == [(ADDED, "a")]
        assert HeldWatch.requests == 1  # ended, not resumed with a second request
    finally:
        HeldWatch.release.set()
        server.shutdown()
        server.server_close()
        kube.close()
