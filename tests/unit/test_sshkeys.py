"""SSH public keys: what is accepted, what is refused and with which message."""

from __future__ import annotations

import base64
import unicodedata

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import given
from hypothesis import strategies as st

from sup.domain.sshkeys import InvalidSshKey, key_set_problem, parse_ssh_public_key, printable
from tests.support import keys

# Vectors from OpenSSH's own ssh-keygen: `ssh-keygen -lf KEY.pub` printed these fingerprints.
OPENSSH_ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEnqODcWz3hzHVL456nYLnJPPSqQm1/YBWCUa9bP+miS root@vm"
OPENSSH_ED25519_FP = "SHA256:CJOgBPaGF3Lu57+/8UY+EFQ2BHi+/oTpiUeELrlsHUU"
OPENSSH_RSA3072 = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQCajEzDRcr4G2WTOnmAT0tZI2TVNZAJptfspQ/fK9/NptEmNrAjkRDL+9WE7S0BWyn7"
    "ssoaB02LCi5NxhJnhmjH2DOyOAxu9zObcY0HhQrkjLo79q60uPiLjZ3eNEIrmyejFZaq1LF1BA+wIJwofs4nl6L+sXrgduUM7yovRkkz"
    "8TsqtaF2fa7TJ5EYjB/RYp8gDyREpRmZRALFVjgRH8sXKmes4T1gEfGvjgpY1vtmPBUHh4KkDmDA+dC4nzzHHmHO417DQiDflxDZuCIA"
    "P9aTV3CDL+A8OxyXLDrllajG+bkCFrbDARLEB5b/yvu9iVAJwVe4gwPEWhBiDICo9t6hB7LL7N/KldRxj9KAoras8sAlRKKtwK9aGyBy"
    "XRS/Yz5Gd+OMR/wfTK/KAtwy5zLHE8/FDXWlfx0DyrNg22zoYVds+OFwlnWrRRidUx0W0cUu3PXGSX41QA3eYEWTFOUOzXn+SLY1lYbP"
    "jVetz5EvL5HqKQ0wvE/Y0IT2G5wd0g0= kim@laptop"
)
OPENSSH_RSA3072_FP = "SHA256:krbu4uYuhpHfw/AxUf103vrpjp8am4Lpumrj4xqlVZ8"


def test_fingerprints_match_ssh_keygen() -> None:
    assert parse_ssh_public_key(OPENSSH_ED25519).fingerprint == OPENSSH_ED25519_FP
    parsed = parse_ssh_public_key(OPENSSH_RSA3072)
    assert parsed.fingerprint == OPENSSH_RSA3072_FP
    assert parsed.bits == 3072
    assert parsed.comment == "kim@laptop"


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda: keys.ed25519_key("a@b"), "ssh-ed25519"),
        (lambda: keys.ecdsa_key(ec.SECP256R1()), "ecdsa-sha2-nistp256"),
        (lambda: keys.ecdsa_key(ec.SECP384R1()), "ecdsa-sha2-nistp384"),
        (lambda: keys.ecdsa_key(ec.SECP521R1()), "ecdsa-sha2-nistp521"),
        (lambda: keys.rsa_key(2048), "ssh-rsa"),
        (lambda: keys.sk_ed25519_key("yubikey"), "sk-ssh-ed25519@openssh.com"),
        (lambda: keys.sk_ecdsa_key(), "sk-ecdsa-sha2-nistp256@openssh.com"),
    ],
)
def test_accepted_key_types(make: object, kind: str) -> None:
    line = make()  # type: ignore[operator]
    parsed = parse_ssh_public_key(line)
    assert parsed.key_type == kind
    assert parsed.line == line
    assert parsed.fingerprint.startswith("SHA256:")


def test_whitespace_is_normalised_and_comment_with_spaces_kept() -> None:
    line = keys.ed25519_key()
    parsed = parse_ssh_public_key(f"  {line.replace(' ', '   ')}   Kim Wexler (laptop)  \n")
    assert parsed.line == f"{line} Kim Wexler (laptop)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("garbage", "unknown key type"),
        ("ssh-ed25519", "no key data"),
        ("ssh-ed25519 not*base64", "not valid base64"),
        ("ssh-ed25519 AAAA", "too short"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "private key"),
        ("ssh-dss AAAAB3NzaC1kc3M=", "DSA"),
        ("ssh-ed25519-cert-v01@openssh.com AAAA", "certificates"),
    ],
)
def test_garbage_is_refused_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(InvalidSshKey, match=message):
        parse_ssh_public_key(text)


def test_small_rsa_refused() -> None:
    with pytest.raises(InvalidSshKey, match="1024 bits; at least 2048"):
        parse_ssh_public_key(keys.rsa_key(1024))


def test_options_refused() -> None:
    line = keys.ed25519_key()
    with pytest.raises(InvalidSshKey, match="options"):
        parse_ssh_public_key(f'from="10.0.0.0/8",no-pty {line}')
    with pytest.raises(InvalidSshKey, match="options"):
        parse_ssh_public_key(f"restrict {line}")


def test_type_mismatch_refused() -> None:
    blob = keys.blob_of(keys.ed25519_key())
    with pytest.raises(InvalidSshKey, match="says it is ssh-rsa but its data is a 'ssh-ed25519'"):
        parse_ssh_public_key(keys.with_blob("ssh-rsa", blob))


def test_truncated_and_padded_blobs_refused() -> None:
    blob = keys.blob_of(keys.ed25519_key())
    with pytest.raises(InvalidSshKey, match="malformed or truncated"):
        parse_ssh_public_key(keys.with_blob("ssh-ed25519", blob[:-3]))
    with pytest.raises(InvalidSshKey, match="malformed or truncated"):
        parse_ssh_public_key(keys.with_blob("ssh-ed25519", blob + b"junk"))


def test_point_not_on_curve_refused() -> None:
    blob = bytearray(keys.blob_of(keys.ecdsa_key(ec.SECP256R1())))
    blob[-1] ^= 0x01  # flip one bit of the point's y coordinate
    with pytest.raises(InvalidSshKey, match="malformed"):
        parse_ssh_public_key(keys.with_blob("ecdsa-sha2-nistp256", bytes(blob)))


def test_two_keys_on_one_line_or_line_breaks_refused() -> None:
    a, b = keys.ed25519_key(), keys.ed25519_key()
    with pytest.raises(InvalidSshKey, match="control characters"):
        parse_ssh_public_key(f"{a}\n{b}")
    with pytest.raises(InvalidSshKey, match="control characters"):
        parse_ssh_public_key(f"{a} comment\x00")


def test_a_tab_in_the_comment_becomes_a_space() -> None:
    # The LDAP target refuses a value with a control character, and with it the user's whole entry.
    line = keys.ed25519_key()
    parsed = parse_ssh_public_key(f"{line} Kim\tWexler\t(laptop)")
    assert parsed.comment == "Kim Wexler (laptop)"
    assert parsed.line == f"{line} Kim Wexler (laptop)"
    kind, blob = line.split()
    assert parse_ssh_public_key(f"{kind}\t{blob}\tkim").line == f"{line} kim"  # tabs between fields


@pytest.mark.parametrize(
    "char", ["\x0b", "\x0c", "\x1b", "\x7f", "\x85", "\x9b", "\u2028", "\u2029"], ids=repr
)
def test_other_control_characters_in_the_comment_are_refused(char: str) -> None:
    with pytest.raises(InvalidSshKey, match="control characters"):
        parse_ssh_public_key(f"{keys.ed25519_key()} kim{char}laptop")


@pytest.mark.parametrize(
    "char",
    ["\u202e", "\u2066", "\u200b", "\u200d", "\ufeff", "\u00ad", "\u00a0", "\u3000", "\ue000"],
    ids=repr,
)
def test_bidi_and_invisible_characters_in_the_comment_are_refused(char: str) -> None:
    # A login pod's keys file leaves such a key out (not printable), while the gateway matches
    # keys by fingerprint: accepting it would let the two disagree on who may log in.
    with pytest.raises(InvalidSshKey, match=f"U\\+{ord(char):04X}.*login pods leave such a key out"):
        parse_ssh_public_key(f"{keys.ed25519_key()} kim{char}laptop")


def test_letters_and_symbols_of_any_script_stay_in_a_comment() -> None:
    line = keys.ed25519_key()
    comment = "Kim Wexler-Müller 金 🔑 ключ"
    assert parse_ssh_public_key(f"{line} {comment}").comment == comment


def test_a_persons_keys_are_capped_by_count_and_by_bytes() -> None:
    line = keys.ed25519_key("kim")
    size = len(line) + 1  # a line and its newline, as the keys file holds it
    assert key_set_problem([line] * 3, max_keys=3, max_bytes=3 * size) is None
    assert key_set_problem([line] * 4, max_keys=3, max_bytes=10**6) == (
        "4 keys; at most 3 per person (accounts.max_ssh_keys)"
    )
    assert key_set_problem([line] * 3, max_keys=3, max_bytes=3 * size - 1) == (
        f"the keys take {3 * size} bytes; at most {3 * size - 1} per person (accounts.max_ssh_key_bytes)"
    )
    wide = keys.ed25519_key("é")  # bytes, not characters: what the ConfigMap counts
    assert key_set_problem([wide], max_keys=1, max_bytes=len(wide) + 1) is not None


def test_oversized_refused() -> None:
    with pytest.raises(InvalidSshKey, match="at most"):
        parse_ssh_public_key("ssh-rsa " + "A" * 20000)


@given(st.text(max_size=300))
def test_arbitrary_text_never_crashes_and_never_passes_unchecked(text: str) -> None:
    try:
        parsed = parse_ssh_public_key(text)
    except InvalidSshKey:
        return
    # Whatever was accepted round-trips: its blob is base64 of a blob of its declared type.
    assert parsed.line.split()[0] == parsed.key_type
    assert base64.b64decode(parsed.blob)


_LINE = keys.ed25519_key()


@given(st.text(max_size=40))
def test_an_accepted_line_has_no_control_character(comment: str) -> None:
    try:
        parsed = parse_ssh_public_key(f"{_LINE} {comment}")
    except InvalidSshKey:
        return
    assert not any(unicodedata.category(c) == "Cc" or c in "\u2028\u2029" for c in parsed.line)
    assert printable(parsed.line)  # what a login pod writes: every accepted key reaches it
    assert parse_ssh_public_key(parsed.line) == parsed
