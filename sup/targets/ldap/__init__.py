"""The LDAP target: users, groups and sudo rules in the directory that sssd reads (ldap3).

target.py      LdapTarget: observe / diff / apply / close
layout.py      where entries go and which classes and attributes SUP owns (from the settings)
entries.py     the entries the desired state calls for (pure); sudo.py the sudoRole of admin groups
model.py       the values passed between them: wanted, refused, retired and observed entries
observe.py     paged, checked searches of SUP's OUs and of the POSIX entries around them
diff.py        wanted vs observed -> Changes (pure)
apply.py       pipelined writes in dependency order
connection.py  bind, TLS, paged search, pipelining (ldap3 ASYNC)
dn.py          DN escaping, parsing and comparison
sssd_config.py the sssd.conf that reads what SUP writes
"""

from sup.targets.ldap.target import LdapTarget

__all__ = ["LdapTarget"]
