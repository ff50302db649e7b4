"""Issue 32, attack 5 (second half): bogus scout reports spent the webhook's API budget.

56 reports a second, each with a made-up token, each cost a TokenReview out of the
webhook's shared 50 QPS, and a new Job's PodGroup then took 3.1 s instead of 0.18 s.
Now a token is reviewed once per minute at most (once per 10 s when refused), tokens not
seen lately at most 5 per second (10 at once; the rest 429), and no error body repeats
what the API server said about a token.
"""

from __future__ import annotations

import json
from typing import Any

from fluence_core import names
from fluence_core.kube.api import TOKEN_REVIEWS
from fluence_core.kube.fake import FakeCluster
from fluence_core.settings import Settings
from fluence_core.hybrid.endpoint import REVIEW_BURST, ReportEndpoint

BODY = json.dumps({"event": names.REPORT_RELEASE, "status": names.SCOUT_STATUS_READY}).encode()


class CountingReviews(FakeCluster):
    """The fake API server, counting the TokenReviews it is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.reviews = 0

    def create(self, resource: Any, body: Any, namespace: str | None = None) -> Any:
        if getattr(resource, "plural", resource) == TOKEN_REVIEWS.plural:
            self.reviews += 1
        return super().create(resource, body, namespace)


def test_a_hundred_reports_with_one_bogus_token_cost_one_token_review() -> None:
    cluster = CountingReviews()
    endpoint = ReportEndpoint(cluster, Settings())
    replies = [endpoint.handle("Bearer not-a-token", BODY) for _ in range(100)]
    assert {r.status for r in replies} == {401}
    assert cluster.reviews == 1


def test_bogus_tokens_by_the_hundred_spend_at_most_the_review_burst() -> None:
    cluster = CountingReviews()
    endpoint = ReportEndpoint(cluster, Settings())
    replies = [endpoint.handle(f"Bearer bogus-{i}", BODY) for i in range(100)]
    assert cluster.reviews <= REVIEW_BURST + 2  # + what the rate refills meanwhile
    assert sum(r.status == 429 for r in replies) >= 100 - REVIEW_BURST - 2


def test_a_refused_tokens_error_body_says_nothing_of_why() -> None:
    reply = ReportEndpoint(FakeCluster(), Settings()).handle("Bearer not-a-token", BODY)
    assert reply.status == 401
    assert reply.body == {"error": "the token is not valid for audience 'fluence'",
                          "code": 401}
