"""The review timer both webhook benchmarks measure with (``benchmarks/webhook_process.py``).

bench_webhook's in-process webhook and ``webhook_process.py`` (the webhook as deployed, run
by a baseline tree's interpreter) time the reviews one way: what one records, the other
reports alike.
"""

from __future__ import annotations

import pytest

from tests.bench_module import load

wp = load("webhook_process")


class Service:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def review(self, body: bytes) -> str:
        self.bodies.append(body)
        if body == b"bad":
            raise ValueError("unreadable")
        return "answer"


def test_each_review_is_answered_as_before_and_its_seconds_recorded() -> None:
    service = Service()
    reviews = wp.time_reviews(service)
    assert service.review(b"one") == "answer"
    with pytest.raises(ValueError):
        service.review(b"bad")  # a failed review is timed too
    assert service.bodies == [b"one", b"bad"]
    assert len(reviews) == 2 and all(seconds >= 0 for seconds in reviews)


def test_take_hands_over_what_was_recorded_since_the_last_take() -> None:
    service = Service()
    reviews = wp.time_reviews(service)
    service.review(b"one")
    first = wp.take(reviews)
    assert len(first) == 1 and reviews == []
    service.review(b"two")
    service.review(b"three")
    assert len(wp.take(reviews)) == 2 and wp.take(reviews) == []


def test_this_process_has_waited_a_non_negative_time_for_a_cpu() -> None:
    assert wp.run_queue_wait() >= 0
    assert wp.run_queue_wait("no-such-process") == 0
