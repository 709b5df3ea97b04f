"""Adopting an existing cluster: read what LDAP and Slurm accounting already hold into an import
document, so that the store describes the cluster as it is and the first reconcile changes nothing.

Each target that can be adopted from says so in its spec (`adopt`, see sup/targets/adoption.py): LDAP
(`--from-ldap`: POSIX users and groups, sup/targets/ldap/adopt.py) and Slurm (`--from-slurm`: accounts
and associations, sup/targets/slurm/adopt.py). They run in registry order into one Adoption, so the
Slurm accounts join the groups LDAP holds. The targets are read with their own `observe`, the same
bulk read a reconcile does.
"""

from __future__ import annotations

from typing import Any

from sup.config import Settings
from sup.config.targets import target_context
from sup.sources.files.document import Document, Problem, Record
from sup.targets.adoption import Adoption, AdoptionError
from sup.targets.base import TargetError
from sup.targets.registry import SPECS

_FIELDS_FROM_LDAP = frozenset(
    {
        "username",
        "uid_number",
        "primary_gid",
        "display_name",
        "given_name",
        "family_name",
        "email",
        "login_shell",
        "home_directory",
        "ssh_public_keys",
    }
)


class AdoptError(Exception):
    """The source cannot be read (not configured, unreachable, a partial read)."""


def adopt(settings: Settings, *, ldap: bool, slurm: bool) -> Document:
    """The import document of what the named targets hold (`sup import --from-ldap --from-slurm`)."""
    return adopt_from(settings, [name for name, wanted in (("ldap", ldap), ("slurm", slurm)) if wanted])


def adopt_from(settings: Settings, names: list[str]) -> Document:
    """The import document of what the named targets hold, read in registry order."""
    from sup.sources.files.document import parse_mapping

    adoption = Adoption(private_groups=settings.ids.private_groups, reserved_names=settings.reserved_names())
    for spec in SPECS:
        if spec.name not in names:
            continue
        if spec.adopt is None:
            raise AdoptError(f"the {spec.name} target cannot be adopted from")
        if not settings.target_enabled(spec.name):
            raise AdoptError(f"the {spec.name} target is not configured: nothing to adopt from")
        try:
            spec.adopt(target_context(spec, settings), adoption)
        except (AdoptionError, TargetError) as exc:
            raise AdoptError(str(exc)) from exc
        except Exception as exc:
            raise AdoptError(f"cannot connect to {spec.name}: {type(exc).__name__}: {exc}") from exc
    raw: dict[str, list[dict[str, Any]]] = {
        "users": adoption.users,
        "groups": adoption.groups,
        "slurm_accounts": adoption.slurm_accounts,
    }
    doc = parse_mapping(raw)
    doc.problems += [
        Problem(p.where, p.message, field=p.field, kind=p.kind, name=p.name) for p in adoption.problems
    ]
    # A record sets only what the source knows: keep the rest of an existing user as it is.
    doc.users = [
        Record(r.spec, r.where, r.fields & (_FIELDS_FROM_LDAP | {"slurm_default_account", "groups"}))
        for r in doc.users
    ]
    return doc
