"""A pull's quick answer to "did this Keycloak user change?", on the loaded store's rows.

A pull without change compares thousands of users; the full path (compare.user_input, then the
users service's differences) parses every SSH key and loads each user's private group. Most users
did not change, and that can be seen from plain values: the same username, the same fields, the
attributes' numbers equal to the stored ones and the very same key lines. The answer is
conservative: `True` only when the full path would find nothing to write and nothing to report;
anything else (a change, an attribute it would report, keys of another origin, a line written
differently) goes the full way.
"""

from __future__ import annotations

from sup.config import Settings
from sup.sources.keycloak.compare import display_name, single
from sup.sources.keycloak.loaded import LoadedStore
from sup.sources.keycloak.naming import keycloak_settings, username_of
from sup.sources.keycloak.reader import KcUser
from sup.store.models import User

KEY_ORIGIN = "idp"


def unchanged(settings: Settings, store: LoadedStore, kc: KcUser) -> bool:
    """Whether `kc` is a user the store already holds exactly as Keycloak says."""
    user = store.user_by_kc.get(kc.id)
    if user is None or username_of(settings, kc) != user.username:
        return False
    plain = (
        (user.email, kc.email),
        (user.given_name, kc.first_name),
        (user.family_name, kc.last_name),
        (user.display_name, display_name(kc)),
        (user.active, kc.enabled),
    )
    if any(stored != wanted for stored, wanted in plain):
        return False
    kcs = keycloak_settings(settings)
    shell = single(kc, kcs.shell_attribute)
    if shell is not None and shell != user.login_shell:
        return False
    if not _number_is(kc, kcs.uid_attribute, user.uid_number):
        return False
    if not _number_is(kc, kcs.gid_attribute, user.primary_gid):
        return False
    return _same_keys(user, kc.attributes.get(kcs.ssh_key_attribute, []))


def _number_is(kc: KcUser, name: str, stored: int) -> bool:
    raw = single(kc, name)
    if raw is None:
        return True
    try:
        return int(raw) == stored
    except ValueError:
        return False  # the full path reports it


def _same_keys(user: User, lines: list[str]) -> bool:
    """The same key lines as the user's `idp` keys, and no key of another origin (with those, which
    line stays where is the users service's question)."""
    given = {line.strip() for line in lines if line.strip()}
    stored = set()
    for key in user.ssh_keys:
        if key.origin != KEY_ORIGIN:
            return False
        stored.add(key.line)
    return given == stored
