"""Who may change what another source owns: the one place that decides it.

Every user and group records the source that owns it (`api`, `import`, `keycloak`, `scim:NAME`).
`sources.precedence` lists sources strongest first; a source may take over what a source listed
after it owns, and a source not listed never takes over anything (the conflict is reported instead).

What an import creates has source `import`. An import changes or prunes only users and groups whose
source is `import`; a record that matches an object of another source (the API, a SCIM connection)
exactly is fine (nothing to do), but one that would change it is reported, as a SCIM connection gets
403 for another connection's users, unless `sources.precedence` ranks `import` above that source.
Pruning removes only what an import created.
"""

from __future__ import annotations

from collections.abc import Sequence

IMPORT_SOURCE = "import"


def may_take_over(precedence: Sequence[str], taker: str, owner: str) -> bool:
    """Whether `taker` may rewrite (and so own) what `owner` holds, as `precedence` (strongest first;
    `scim:*` stands for every SCIM connection) says."""

    def rank(source: str) -> int | None:
        for index, entry in enumerate(precedence):
            if entry == source or (entry.endswith(":*") and source.startswith(entry[:-1])):
                return index
        return None

    if taker == owner:
        return True
    mine, theirs = rank(taker), rank(owner)
    return mine is not None and (theirs is None or mine < theirs)


def may_change(current_source: str, precedence: Sequence[str] | None = None) -> bool:
    """Whether an import may change an object that currently has `current_source` (with `precedence`,
    as sources.precedence says; without, only its own)."""
    if precedence is None:
        return current_source == IMPORT_SOURCE
    return may_take_over(precedence, IMPORT_SOURCE, current_source)


def refusal(kind: str, name: str, current_source: str) -> str:
    return (
        f"{kind} {name!r} belongs to source {current_source!r}; an import changes only what it "
        f"created (source {IMPORT_SOURCE!r}) unless sources.precedence ranks it higher"
    )
