"""One person per home, in the store: the index on users.home_directory becomes UNIQUE, so that two
concurrent creates of one home can never both commit (sup/users/homes.py also serialises them with
its `homes` lock and answers a clear 409; the index is the backstop). On PostgreSQL the column's
collation becomes "C" (byte order, as SQLite's BINARY): the check for homes nested in each other
asks the index for a range of paths (`/home/alice/` to `/home/alice0`), which only byte order makes
mean "every path below /home/alice" whatever the database's locale.

Existing data: homes stored before the one-home rule (0007's time) may repeat. This migration does
not pick a winner: if any home is shared it fails before changing anything, naming each shared home
and its users (`sup db upgrade` exits 6); give each person their own home (PATCH
/api/v1/users/NAME `home_directory`) and run it again. Homes nested in each other are not looked
for here: a stored home stays until it changes (docs/api.md, "Home directories"), and every new or
changed home is checked.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from sup.errors import ConfigurationError

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_INDEX = "ix_users_home_directory"
_SHOWN = 20


def _shared_homes() -> list[tuple[str, list[str]]]:
    rows = op.get_bind().execute(
        sa.text(
            "SELECT u.home_directory, u.username FROM users u WHERE u.home_directory IN"
            " (SELECT home_directory FROM users GROUP BY home_directory HAVING count(*) > 1)"
            " ORDER BY u.home_directory, u.username"
        )
    )
    shared: dict[str, list[str]] = {}
    for home, username in rows:
        shared.setdefault(home, []).append(username)
    return list(shared.items())


def upgrade() -> None:
    shared = _shared_homes()
    if shared:
        listed = "; ".join(f"{home!r}: {', '.join(names)}" for home, names in shared[:_SHOWN])
        more = f" (and {len(shared) - _SHOWN} more)" if len(shared) > _SHOWN else ""
        raise ConfigurationError(
            f"migration 0009 makes each home one person's, but {len(shared)} home(s) are shared: "
            f"{listed}{more}. Give each person their own home_directory (PATCH /api/v1/users/NAME), "
            "then run `sup db upgrade` again; nothing was changed."
        )
    op.drop_index(_INDEX, table_name="users")
    if op.get_bind().dialect.name == "postgresql":
        op.execute('ALTER TABLE users ALTER COLUMN home_directory TYPE VARCHAR(1024) COLLATE "C"')
    op.create_index(_INDEX, "users", ["home_directory"], unique=True)


def downgrade() -> None:
    op.drop_index(_INDEX, table_name="users")
    if op.get_bind().dialect.name == "postgresql":
        op.execute('ALTER TABLE users ALTER COLUMN home_directory TYPE VARCHAR(1024) COLLATE "default"')
    op.create_index(_INDEX, "users", ["home_directory"])
