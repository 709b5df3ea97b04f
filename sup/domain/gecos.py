"""gecos: the comment field of a passwd entry, derived from a person's name.

`getent passwd` prints `name:x:uid:gid:gecos:home:shell`: a `:` in gecos shifts every field after it
for whatever parses that line, and a control character breaks the line. RFC 2307 makes gecos an IA5
(ASCII) string. So the name is folded to ASCII (accents stripped, what has no ASCII form dropped),
`:` and control characters become spaces, and runs of spaces become one. Commas are kept: they are
the traditional separator of gecos' own sub-fields (name, room, phones), which readers tolerate.
"""

from __future__ import annotations

import unicodedata


def gecos_text(text: str, fallback: str) -> str:
    """`text` as one ASCII passwd field without `:` or control characters; `fallback` if none is left."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    cleaned = "".join(" " if c == ":" or not c.isprintable() else c for c in folded)
    return " ".join(cleaned.split()) or fallback
