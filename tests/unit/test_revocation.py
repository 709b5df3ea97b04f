"""The revocation list's pure part (sup/domain/revocation.py): which signed keys an outside sshd must
refuse, read from `sign_certificate` audit entries."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, timezone

from sup.domain.revocation import SignedKey, revoked_keys, revoked_keys_file, signed_key
from sup.ssh_ca.router import ReusedAnswer

NOW = datetime(2030, 5, 1, 12, 0, tzinfo=UTC)
KIM_LAPTOP = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKimLaptop"
KIM_DESK = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKimDesk"
LEE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILee"


def _signed(username: str, key: str, hours_left: float) -> SignedKey:
    return SignedKey(username, key, NOW + timedelta(hours=hours_left))


def test_a_suspended_persons_unexpired_key_is_listed_an_active_persons_is_not() -> None:
    signed = [_signed("kim", KIM_LAPTOP, 3), _signed("lee", LEE, 3)]
    assert revoked_keys(signed, {"kim": False, "lee": True}, NOW) == [KIM_LAPTOP]


def test_a_removed_person_is_listed() -> None:
    assert revoked_keys([_signed("kim", KIM_LAPTOP, 3)], {}, NOW) == [KIM_LAPTOP]


def test_an_expired_certificate_is_not_listed() -> None:
    signed = [_signed("kim", KIM_LAPTOP, -1), _signed("kim", KIM_DESK, 0)]  # valid_before == now: expired
    assert revoked_keys(signed, {"kim": False}, NOW) == []


def test_two_certificates_of_a_person_are_both_listed_a_key_signed_twice_once() -> None:
    signed = [_signed("kim", KIM_LAPTOP, 1), _signed("kim", KIM_DESK, 2), _signed("kim", KIM_LAPTOP, 8)]
    assert revoked_keys(signed, {"kim": False}, NOW) == [KIM_DESK, KIM_LAPTOP]


def test_the_audit_entry_gives_the_key_and_its_end() -> None:
    until = NOW + timedelta(hours=8)
    after = {"serial": "7", "public_key": KIM_LAPTOP, "valid_before": until.isoformat()}
    assert signed_key("kim", after) == SignedKey("kim", KIM_LAPTOP, until)
    other_zone = until.astimezone(timezone(timedelta(hours=2))).isoformat()
    assert signed_key("kim", {**after, "valid_before": other_zone}) == SignedKey("kim", KIM_LAPTOP, until)


def test_entries_without_a_public_key_or_malformed_are_skipped() -> None:
    until = (NOW + timedelta(hours=8)).isoformat()
    # Signed before SUP recorded the key: nothing to list.
    assert signed_key("kim", {"serial": "7", "fingerprint": "SHA256:x", "valid_before": until}) is None
    assert signed_key("kim", None) is None
    assert signed_key("kim", {"public_key": KIM_LAPTOP}) is None
    assert signed_key("kim", {"public_key": KIM_LAPTOP, "valid_before": "soon"}) is None
    assert signed_key("kim", {"public_key": KIM_LAPTOP, "valid_before": "2030-05-01T20:00:00"}) is None
    assert signed_key("kim", {"public_key": f"{KIM_LAPTOP} kim@laptop", "valid_before": until}) is None
    assert signed_key("kim", {"public_key": 5, "valid_before": until}) is None


def test_the_file_is_a_comment_line_then_one_key_a_line() -> None:
    text = revoked_keys_file([KIM_DESK, KIM_LAPTOP], NOW.astimezone(timezone(timedelta(hours=-5))))
    assert text == (f"# SUP revoked keys, generated 2030-05-01T12:00:00Z; 2 keys\n{KIM_DESK}\n{KIM_LAPTOP}\n")
    assert revoked_keys_file([], NOW) == "# SUP revoked keys, generated 2030-05-01T12:00:00Z; 0 keys\n"


def test_the_list_is_made_at_most_once_an_interval_however_many_ask() -> None:
    """GET /api/v1/ssh-ca/revoked-keys needs no token: 200 requests at once read the signings once,
    and the next interval's request reads them again."""
    made: list[int] = []
    seconds = [60.0]
    answer = ReusedAnswer(lambda: seconds[0])

    def compute() -> tuple[str, str]:
        made.append(1)
        time.sleep(0.01)  # a slow read: the others wait for it rather than read too
        return f"# list {len(made)}\n", str(len(made))

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda _: answer.get(compute), range(200)))
    assert len(made) == 1 and set(answers) == {("# list 1\n", "1")}
    seconds[0] = 0.0  # the interval has passed
    assert answer.get(compute) == ("# list 2\n", "2")
