"""Per-source admission of `sup gateway` (limits.py): one address flooding or holding connections in
the login grace takes its own share and no more, so everyone else still gets in; the bookkeeping
stays bounded however many addresses come."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from sup.config.gateway import GatewaySettings
from sup.gateway.limits import Admission, SourceLimits, Verdict, source_key

FLOOD = "10.0.0.66"
USER = "10.0.0.1"


def gate(**per_source: float) -> Admission:
    limits = {"max_connections": 10, "max_unauthenticated": 5, "rate": 1000.0, "burst": 1000.0, **per_source}
    return Admission(
        max_connections=100,
        max_new_per_second=1000,
        now=0,
        per_source=SourceLimits(
            int(limits["max_connections"]),
            int(limits["max_unauthenticated"]),
            limits["rate"],
            limits["burst"],
        ),
    )


def test_one_source_holding_unauthenticated_connections_leaves_room_for_others() -> None:
    admission = gate()
    verdicts = [admission.arrive(FLOOD, 0) for _ in range(1000)]

    assert verdicts[:5] == [Verdict.ADMIT] * 5
    assert verdicts[5:10] == [Verdict.BUSY] * 5  # over its unauthenticated limit: told "busy"
    assert set(verdicts[10:]) == {Verdict.DROP}  # twice over: closed without a handshake
    assert admission.open == 10  # of the process's 100
    assert admission.arrive(USER, 0) is Verdict.ADMIT


def test_authenticated_connections_free_the_unauthenticated_share_but_count_as_held() -> None:
    admission = gate()
    for _ in range(5):
        assert admission.arrive(USER, 0) is Verdict.ADMIT
        admission.authenticated(USER)
    assert admission.held(USER) == (5, 0)
    more = [admission.arrive(USER, 0) for _ in range(5)]
    assert more == [Verdict.ADMIT] * 5
    assert admission.held(USER) == (10, 5)
    assert admission.arrive(USER, 0) is Verdict.BUSY  # 11 held: over max_connections 10

    admission.leave(USER, 0, authenticated=True)  # one that logged in closes
    admission.leave(USER, 0)  # the busy one closes
    assert admission.held(USER) == (9, 5)
    admission.authenticated(USER)  # one of the five logs in
    assert admission.arrive(USER, 0) is Verdict.ADMIT


def test_a_source_flooding_new_connections_takes_only_its_rate_of_the_process() -> None:
    admission = Admission(
        max_connections=1000,
        max_new_per_second=100,
        now=0,
        per_source=SourceLimits(max_connections=1000, max_unauthenticated=1000, rate=20, burst=20),
    )
    admitted = 0
    for step in range(100):  # 10 s of a flood at 1000/s, each connection closed at once
        now = step / 10
        for _ in range(100):
            if admission.arrive(FLOOD, now) is Verdict.ADMIT:
                admitted += 1
            admission.leave(FLOOD, now)
        assert admission.arrive(USER, now) is Verdict.ADMIT  # someone else, every 0.1 s
        admission.leave(USER, now, authenticated=False)
    assert admitted <= 20 + 20 * 10  # its burst, then its rate


def test_a_source_that_disconnects_keeps_its_rate_until_the_bucket_refills() -> None:
    admission = gate(rate=1, burst=2)
    for _ in range(2):
        assert admission.arrive(FLOOD, 0) is Verdict.ADMIT
        admission.leave(FLOOD, 0)
    assert admission.arrive(FLOOD, 0.1) is Verdict.BUSY  # not forgotten on leaving
    admission.leave(FLOOD, 0.1)
    assert admission.arrive(FLOOD, 1.2) is Verdict.ADMIT


def test_the_process_limits_still_hold_across_sources() -> None:
    admission = Admission(max_connections=4, max_new_per_second=1000, now=0, per_source=None)
    verdicts = [admission.arrive(f"10.0.0.{n}", 0) for n in range(10)]
    assert verdicts == [Verdict.ADMIT] * 4 + [Verdict.BUSY] * 4 + [Verdict.DROP] * 2


def test_many_sources_are_remembered_boundedly() -> None:
    admission = Admission(
        max_connections=100,
        max_new_per_second=1e9,
        now=0,
        per_source=SourceLimits(10, 10, rate=1, burst=10),
        max_idle_sources=50,
    )
    for n in range(5000):  # 5000 addresses connect once and leave, within one second
        source = f"10.{n // 65536}.{n // 256 % 256}.{n % 256}"
        assert admission.arrive(source, n / 5000) is Verdict.ADMIT
        admission.leave(source, n / 5000)
    assert admission.sources() <= 51
    assert admission.open == 0
    assert admission.arrive(USER, 100) is Verdict.ADMIT
    assert admission.sources() == 1  # the others idle long enough for a full bucket: forgotten


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),
        ("2001:db8:1:3::1", "2001:db8:1:3::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("?", "?"),
    ],
)
def test_sources_are_ipv4_addresses_and_ipv6_networks(host: str, key: str) -> None:
    assert source_key(host) == key


def test_the_ipv6_prefix_is_a_setting() -> None:
    assert source_key("2001:db8:1:2:aaaa::1", 128) == "2001:db8:1:2:aaaa::1/128"
    assert source_key("2001:db8:1:2:aaaa::1", 48) == "2001:db8:1::/48"


def test_per_source_settings_have_safe_defaults_and_refuse_nonsense() -> None:
    settings = GatewaySettings()
    assert settings.max_unauthenticated_per_source * 2 < settings.max_connections
    assert settings.max_new_per_second_per_source < settings.max_new_per_second
    assert settings.source_ipv6_prefix == 64
    for bad in (
        {"max_connections_per_source": 0},
        {"max_unauthenticated_per_source": -1},
        {"max_new_per_second_per_source": 0},
        {"new_burst_per_source": 0},
        {"source_ipv6_prefix": 129},
        {"source_ipv6_prefix": 8},
    ):
        with pytest.raises(ValidationError):
            GatewaySettings(**bad)


def test_a_flood_at_full_speed_from_its_first_second_leaves_a_person_the_processs_tokens() -> None:
    """A source's burst (60) above the process's bucket (40): before, a flood's first fraction of a
    second took every process token and the next person was told "busy" (seen on a quiet machine in
    tests/gateway/test_admission.py); a source that spent its bucket may not take the last half."""
    gate = Admission(1000, 40, now=0, per_source=SourceLimits(200, 50, 20, 60))
    for step in range(1000):  # 1000 connections in 0.3 s, each closed at once
        now = step * 0.0003
        if gate.arrive("203.0.113.9", now) is not Verdict.DROP:
            gate.leave("203.0.113.9", now)
    assert [gate.arrive("198.51.100.7", 0.3 + i / 100) for i in range(3)] == [Verdict.ADMIT] * 3
