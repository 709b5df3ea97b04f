"""Who may change what an import touches: the one place that decides it.

What an import creates has source `import`. An import changes or prunes only users and groups whose
source is `import`; a record that matches an object of another source (the API, a SCIM connection)
exactly is fine (nothing to do), but one that would change it is reported, as a SCIM connection gets
403 for another connection's users. Source precedence, when it comes, replaces `may_change`.
"""

from __future__ import annotations

IMPORT_SOURCE = "import"


def may_change(current_source: str) -> bool:
    """Whether an import may change or prune an object that currently has `current_source`."""
    return current_source == IMPORT_SOURCE


def refusal(kind: str, name: str, current_source: str) -> str:
    return (
        f"{kind} {name!r} belongs to source {current_source!r}; an import changes only what it "
        f"created (source {IMPORT_SOURCE!r})"
    )
