"""Who may change what an import touches: the one place that decides it.

What an import creates has source `import`. An import changes or prunes only users and groups whose
source is `import`; a record that matches an object of another source (the API, a SCIM connection)
exactly is fine (nothing to do), but one that would change it is reported, as a SCIM connection gets
403 for another connection's users, unless `sources.precedence` ranks `import` above that source.
Pruning removes only what an import created.
"""

from __future__ import annotations

from sup.config import SourcePolicy

IMPORT_SOURCE = "import"


def may_change(current_source: str, policy: SourcePolicy | None = None) -> bool:
    """Whether an import may change an object that currently has `current_source` (with `policy`,
    as sources.precedence says; without, only its own)."""
    if policy is None:
        return current_source == IMPORT_SOURCE
    return policy.may_take_over(IMPORT_SOURCE, current_source)


def refusal(kind: str, name: str, current_source: str) -> str:
    return (
        f"{kind} {name!r} belongs to source {current_source!r}; an import changes only what it "
        f"created (source {IMPORT_SOURCE!r}) unless sources.precedence ranks it higher"
    )
