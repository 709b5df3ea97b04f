"""The LDAP target: users, groups and sudo rules in the directory that sssd reads (ldap3).

target.py      LdapTarget: observe / diff / apply / close
layout.py      where entries go and which classes and attributes SUP owns (from the settings)
entries.py     the entries the desired state calls for (pure); sudo.py the sudoRole of admin groups
model.py       the values passed between them: wanted, refused, retired and observed entries
observe.py     paged, checked searches of SUP's OUs and of the POSIX entries around them
unchanged.py   a full pass after a quiet one reads only entryCSNs, and plans nothing if they held
scoped.py      a pass after writes: read and plan only the named users and the groups around them
diff.py        wanted vs observed -> Changes (pure)
apply.py       pipelined writes in dependency order
connection.py  bind, TLS, paged search, pipelining (ldap3 ASYNC)
dn.py          DN escaping, parsing and comparison
sssd_config.py the sssd.conf that reads what SUP writes (public: render_sssd_config)
settings.py    LdapSettings (settings key `ldap`); spec.py SPEC, what the registry lists
adopt.py       `sup import --from-ldap` (the spec's adopt hook)

Public surface (what code outside the package may use): SPEC, LdapSettings, LdapTarget,
render_sssd_config, SssdConfigError. LdapTarget is imported lazily: ldap3 loads when a target opens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sup.targets.ldap.settings import LdapSettings
from sup.targets.ldap.spec import SPEC
from sup.targets.ldap.sssd_config import SssdConfigError
from sup.targets.ldap.sssd_config import render as render_sssd_config

if TYPE_CHECKING:
    from sup.targets.ldap.target import LdapTarget

__all__ = ["SPEC", "LdapSettings", "LdapTarget", "SssdConfigError", "render_sssd_config"]


def __getattr__(name: str) -> Any:
    if name == "LdapTarget":
        from sup.targets.ldap.target import LdapTarget

        return LdapTarget
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
