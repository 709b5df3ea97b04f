"""Which login pods go to sleep, from the gateways' heartbeats and the clock."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

from sup.domain.login_pods import Route
from sup.domain.login_sleep import Heartbeat, IdleDecision, IdlePolicy, PodState, decide

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
ALICE = Route("user", "alice")
BOB = Route("user", "bob")
PHYSICS = Route("group", "physics")
POLICY = IdlePolicy(idle_seconds=600, heartbeat_seconds=15)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def awake(pod: Route, last_used: float | None, woken: float = 3600) -> PodState:
    return PodState(
        pod, awake=True, woken_at=ago(woken), last_activity=None if last_used is None else ago(last_used)
    )


def beat(
    at: float = 5,
    sessions: Mapping[Route, int] | None = None,
    busy: frozenset[Route] = frozenset(),
    silent: frozenset[Route] = frozenset(),
) -> Heartbeat:
    return Heartbeat("gw-1", ago(at), dict(sessions or {}), busy, silent)


def test_idle_long_enough_sleeps_recently_used_stays() -> None:
    states = [awake(ALICE, 600), awake(BOB, 599)]  # idle_seconds 600: exactly that is enough
    assert decide(states, [beat()], NOW, POLICY) == IdleDecision(frozenset(), frozenset({ALICE}))


def test_an_open_session_holds_the_pod_and_counts_as_use() -> None:
    states = [awake(ALICE, 3000)]
    decision = decide(states, [beat(sessions={ALICE: 1})], NOW, POLICY)
    assert decision == IdleDecision(frozenset({ALICE}), frozenset())


def test_zero_sessions_is_no_session() -> None:
    assert decide([awake(ALICE, 3000)], [beat(sessions={ALICE: 0})], NOW, POLICY).sleep == {ALICE}


def test_processes_of_her_own_hold_the_pod() -> None:
    decision = decide([awake(ALICE, 3000)], [beat(busy=frozenset({ALICE}))], NOW, POLICY)
    assert decision == IdleDecision(frozenset({ALICE}), frozenset())


def test_a_silent_reporter_holds_the_pod_until_max_awake() -> None:
    silent = [beat(silent=frozenset({ALICE}))]
    assert decide([awake(ALICE, 3000, woken=7000)], silent, NOW, POLICY).sleep == frozenset()
    capped = IdlePolicy(idle_seconds=600, heartbeat_seconds=15, max_awake_seconds=7200)
    assert decide([awake(ALICE, 3000, woken=7000)], silent, NOW, capped).sleep == frozenset()
    assert decide([awake(ALICE, 3000, woken=7200)], silent, NOW, capped).sleep == {ALICE}


def test_a_stale_heartbeat_no_longer_holds_anything() -> None:
    states = [awake(ALICE, 3000)]
    fresh = Heartbeat("gw-2", ago(1))  # another replica, reporting, holding nothing
    assert decide(states, [beat(at=45, sessions={ALICE: 2}), fresh], NOW, POLICY).sleep == frozenset()
    assert decide(states, [beat(at=46, sessions={ALICE: 2}), fresh], NOW, POLICY).sleep == {ALICE}


def test_with_no_live_heartbeat_nothing_sleeps_and_the_awake_count_as_in_use() -> None:
    """No gateway has reported within three intervals: SUP cannot see sessions or tmux, so it puts
    nothing to sleep, and stamps the awake pods in use so that they get idle_seconds once it can."""
    asleep = PodState(BOB, awake=False, woken_at=None, last_activity=ago(99999))
    states = [awake(ALICE, 3000), awake(PHYSICS, None), asleep]
    for heartbeats in ([], [beat(at=46, sessions={ALICE: 1})], [beat(at=3600)]):
        decision = decide(states, heartbeats, NOW, POLICY)
        assert decision == IdleDecision(frozenset({ALICE, PHYSICS}), frozenset())
    # one live report, even an empty one, and the idle pods sleep again
    assert decide(states, [beat(at=45)], NOW, POLICY) == IdleDecision(
        frozenset(), frozenset({ALICE, PHYSICS})
    )


def test_any_replica_holding_a_session_is_enough() -> None:
    beats = [beat(), Heartbeat("gw-2", ago(1), sessions={PHYSICS: 3})]
    decision = decide([awake(PHYSICS, 3000), awake(ALICE, 3000)], beats, NOW, POLICY)
    assert decision == IdleDecision(frozenset({PHYSICS}), frozenset({ALICE}))


def test_asleep_pods_stay_asleep_and_never_used_pods_sleep() -> None:
    asleep = PodState(BOB, awake=False, woken_at=None, last_activity=ago(99999))
    assert decide([asleep, awake(ALICE, None)], [beat()], NOW, POLICY).sleep == {ALICE}
