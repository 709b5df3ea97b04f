"""`sup export`: the store as an import document (users, groups, slurm_accounts), so that an export
imported into an empty store (or the same one) gives the same users, groups, ids and accounts."""

from __future__ import annotations

import json
from typing import Any

import yaml
from sqlalchemy.orm import Session

from sup.sources.files.current import load_current


def export_document(session: Session) -> dict[str, list[dict[str, Any]]]:
    current = load_current(session)
    users = []
    for name in sorted(current.users):
        user = current.users[name]
        users.append({**user.values, "groups": sorted(user.groups)})
    groups = [
        {**group.values, "members": sorted(group.members)}
        for name, group in sorted(current.groups.items())
        if not group.private  # a private group follows its user
    ]
    accounts = [current.accounts[name] for name in sorted(current.accounts)]
    return {"users": users, "groups": groups, "slurm_accounts": accounts}


def dump(document: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(document, indent=2) + "\n"
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
