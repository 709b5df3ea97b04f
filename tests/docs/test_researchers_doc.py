"""docs/researchers.md quotes what people really see: each text the gateway sends (sup/gateway/
texts.py, with the default settings) is in its table word for word, and its ssh config block is the
one the gateway's own help prints."""

from __future__ import annotations

import re
from pathlib import Path

from sup.config.gateway import GatewaySettings
from sup.gateway import texts

DOC = Path(__file__).resolve().parents[2] / "docs" / "researchers.md"


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_every_gateway_text_is_explained_as_sent() -> None:
    doc = flat(DOC.read_text())
    defaults = GatewaySettings()
    sent = [
        texts.BUSY,
        texts.TOO_MANY_KEYS,
        texts.WAKE_BANNER.strip(),
        texts.no_such_pod("X"),
        texts.did_not_start(defaults.wake_timeout_seconds),
        texts.cannot_wake(),
        texts.too_many_sessions(defaults.max_sessions_per_person),
        texts.access_removed("X"),
        texts.help_text("alice", "login.cluster.example").splitlines()[0],
    ]
    missing = [text for text in sent if flat(text) not in doc]
    assert not missing, f"gateway texts researchers.md does not quote: {missing}"


def test_the_config_block_is_the_one_the_gateway_prints() -> None:
    printed = texts.help_text("alice", "login.cluster.example")
    block = re.search(r"^ {4}Host cluster\r?\n(?: {8}\S.*\r?\n)+", printed, re.MULTILINE)
    assert block is not None
    for line in block.group(0).splitlines():
        assert line in DOC.read_text().splitlines(), line
