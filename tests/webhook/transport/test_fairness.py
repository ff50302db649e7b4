"""Who keeps a connection when the webhook is full (fluence_core/webhook/transport/fairness.py).

The rules on their own, with times passed in; the attacks through a real server are in
tests/hostile/test_idle_connections.py.
"""

from __future__ import annotations

from fluence_core.webhook.transport.fairness import BUSY, IDLE, PENDING, PENDING_GRACE, Slot, Slots

API = "10.0.0.1"


def slots(max_connections: int = 8, max_per_client: int = 4, reserved: int = 2,
          client_auth: bool = False) -> Slots:
    return Slots(max_connections=max_connections, max_per_client=max_per_client,
                 reserved=reserved, client_auth=client_auth, reserve_share=2,
                 pending_grace=PENDING_GRACE, busy_idle_timeout=5.0)


def fill(rules: Slots, client: str, count: int, *, state: str = IDLE,
         now: float = 0.0) -> list[Slot]:
    made = []
    for _ in range(count):
        slot = rules.admit(client, object(), now).slot
        assert slot is not None
        slot.enter(state, now)
        made.append(slot)
    return made


def test_a_connection_past_its_addresss_share_takes_the_place_of_its_longest_idle_one() -> None:
    rules = slots()
    first, *rest = fill(rules, API, 4)
    first.enter(IDLE, -10.0)
    admission = rules.admit(API, object(), 1.0)
    assert admission.slot is not None and admission.replaces is first and first.evicted
    assert rules.held_by(API) == 4 and first not in rules.open


def test_a_connection_past_its_addresss_share_is_refused_when_all_of_it_are_busy() -> None:
    rules = slots()
    fill(rules, API, 4, state=BUSY)
    assert rules.admit(API, object(), 1.0).slot is None
    assert rules.held_by(API) == 4


def test_a_connection_that_presented_a_client_certificate_never_gives_way() -> None:
    rules = slots(client_auth=True)
    for slot in fill(rules, API, 4):
        slot.authenticated = True
    assert rules.admit(API, object(), 100.0).slot is None


def test_a_new_connection_gives_way_only_after_its_grace() -> None:
    rules = slots()
    fill(rules, API, 4, state=PENDING, now=0.0)
    assert rules.admit(API, object(), PENDING_GRACE / 2).slot is None
    assert rules.admit(API, object(), PENDING_GRACE).replaces is not None


def test_when_full_the_address_holding_the_most_gives_way_to_one_holding_fewer() -> None:
    rules = slots(max_connections=8, max_per_client=4, reserved=0)
    fill(rules, "10.0.0.2", 4)
    fill(rules, "10.0.0.3", 3)
    fill(rules, API, 1)
    admission = rules.admit(API, object(), 1.0)
    assert admission.replaces is not None and admission.replaces.client == "10.0.0.2"
    assert (rules.held_by("10.0.0.2"), rules.held_by(API)) == (3, 2)


def test_when_full_no_address_gives_way_to_one_holding_as_many() -> None:
    rules = slots(max_connections=8, max_per_client=5, reserved=0)
    fill(rules, "10.0.0.2", 4)
    fill(rules, "10.0.0.3", 4)
    assert rules.admit("10.0.0.3", object(), 1.0).slot is None
    assert (rules.held_by("10.0.0.2"), rules.held_by("10.0.0.3")) == (4, 4)


def test_the_reserve_takes_an_address_holding_few_connections_and_not_a_heavy_one() -> None:
    rules = slots(max_connections=8, max_per_client=8, reserved=2)
    fill(rules, "10.0.0.2", 6, state=BUSY)  # nothing spare: the open slots are simply taken
    assert rules.admit("10.0.0.2", object(), 1.0).slot is None  # holds 6, share is 2
    assert rules.admit(API, object(), 1.0).slot is not None
    assert rules.admit(API, object(), 1.0).slot is not None
    assert rules.admit(API, object(), 1.0).slot is None  # the reserve is 2


def test_with_a_client_ca_any_address_may_take_a_reserved_slot() -> None:
    rules = slots(max_connections=8, max_per_client=8, reserved=2, client_auth=True)
    fill(rules, API, 6, state=BUSY)
    assert rules.admit(API, object(), 1.0).slot is not None


def test_while_more_than_half_full_long_idle_connections_are_stale() -> None:
    rules = slots(max_connections=8, max_per_client=8)
    idle = fill(rules, "10.0.0.2", 4, now=0.0)
    assert rules.stale(100.0) == []  # half full: the long idle timeout holds
    late = fill(rules, "10.0.0.2", 1, now=99.0)
    certified = fill(rules, API, 1, now=0.0)
    certified[0].authenticated = True
    stale = rules.stale(100.0)
    assert set(stale) == set(idle) and late[0] in rules.open and certified[0] in rules.open
    assert rules.held_by("10.0.0.2") == 1 and rules.replaced == 4


def test_a_released_connection_frees_its_place_once() -> None:
    rules = slots()
    (slot,) = fill(rules, API, 1)
    rules.release(slot)
    rules.release(slot)
    assert rules.held_by(API) == 0 and not rules.open
