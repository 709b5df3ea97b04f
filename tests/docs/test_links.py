"""No link in the repository points outside it.

Every http(s):// URL in a tracked text file must name a host that is no real site: the reserved
example domains and top-level domains (RFC 2606, RFC 6761), loopback, the documentation address
blocks (RFC 5737, RFC 3849), a cluster-internal name (`*.svc`, `*.cluster.local`), a single label
(`http://sup:8080`, `https://SUP/scim/v2`: a placeholder or a Service name, never a public site), or
a template placeholder (`{host}`, `%s`). Other schemes (ldap://, postgresql://, urn:...) are
addresses of the site's own servers or names, not links, and are not looked at; so are URLs that
are only identifiers, never fetched: a JSON Schema's `"$schema"` (the chart's values.schema.json
names its draft so) and an XML namespace (`xmlns="..."`).

Markdown links without a scheme must resolve to a file or directory inside the repository.
"""

from __future__ import annotations

import ipaddress
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

URL = re.compile(r"https?://([^\s/\"'<>)`\]|,;]*)", re.IGNORECASE)
RESERVED_TLDS = ("example", "test", "invalid", "localhost", "svc", "local", "internal")
EXAMPLE_DOMAINS = ("example.org", "example.com", "example.net")
DOCUMENTATION_NETS = [
    ipaddress.ip_network(n)
    for n in ("127.0.0.0/8", "192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "::1/128", "2001:db8::/32")
]
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
IDENTIFIER = re.compile(r"""("\$schema"\s*:\s*"|xmlns(:[\w-]+)?\s*=\s*["'])$""")


def tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, text=True
    ).stdout.split("\0")
    files = []
    for name in filter(None, names):
        path = ROOT / name
        if not path.is_file():  # deleted in the worktree, not yet committed
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        files.append(path)
    return files


def host_of(authority: str) -> str:
    host = authority.rsplit("@", 1)[-1]
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    return host.split(":", 1)[0].rstrip(".")


def is_placeholder(host: str) -> bool:
    """True when `host` cannot name a real site outside the repository."""
    if not host or any(c in host for c in "{}%$<*"):
        return True  # a template: {host}, %s, ${VAR}, <host>
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return any(address in net for net in DOCUMENTATION_NETS)
    lower = host.lower()
    if "." not in lower:
        return True  # a single label: a placeholder (SUP, i) or a cluster Service name (sup)
    if lower.split(".")[-1] in RESERVED_TLDS:
        return True
    return any(lower == d or lower.endswith("." + d) for d in EXAMPLE_DOMAINS)


def external_urls(text: str) -> list[str]:
    return [
        m.group(0)
        for m in URL.finditer(text)
        if not is_placeholder(host_of(m.group(1))) and not IDENTIFIER.search(text[: m.start()])
    ]


@pytest.mark.parametrize(
    ("rest", "external"),
    [  # what follows the scheme; the URLs are put together here so that this file holds none
        ("github.com/sup-project/sup#scim", True),
        ("kubernetes.io/docs/reference/", True),
        ("8.8.8.8/", True),
        ("user:pw@evil.example.org.attacker.net/", True),
        ("sso.example.org/realms/research", False),
        ("SUP/scim/v2", False),
        ("sup:8080", False),
        ("127.0.0.1:8080", False),
        ("[::1]:8443/", False),
        ("%s.%s.svc:%v", False),
        ("sup-tls.sup-system.svc:8443", False),
        ("kubernetes.default.svc.cluster.local", False),
        ("{cluster_ip}/", False),
        ("idp.example/scim/v2", False),
        ("sup.test/", False),
    ],
)
def test_the_check_tells_real_sites_from_placeholders(rest: str, external: bool) -> None:
    for scheme in ("http", "https"):
        assert bool(external_urls(f"see {scheme}://{rest} there")) is external


@pytest.mark.parametrize(
    ("before", "external"),
    [
        ('{"$schema": "', False),
        ('<svg xmlns="', False),
        ('<x xmlns:xsi="', False),
        ('{"documentation": "', True),
        ('"$schema": "x", "home": "', True),
    ],
)
def test_identifiers_are_not_links(before: str, external: bool) -> None:
    assert bool(external_urls(before + "http" + '://json-schema.org/draft-07/schema#"')) is external


def test_no_tracked_file_links_to_a_site_outside_the_repository() -> None:
    found = []
    for path in tracked_text_files():
        text = path.read_text(errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            found += [f"{path.relative_to(ROOT)}:{number}: {url}" for url in external_urls(line)]
    assert not found, "links outside the repository:\n" + "\n".join(found)


def test_relative_markdown_links_resolve_inside_the_repository() -> None:
    broken = []
    for path in tracked_text_files():
        if path.suffix != ".md":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for target in MARKDOWN_LINK.findall(line):
                if re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
                    continue
                resolved = (path.parent / target.split("#", 1)[0]).resolve()
                if not resolved.is_relative_to(ROOT) or not resolved.exists():
                    broken.append(f"{path.relative_to(ROOT)}:{number}: {target}")
    assert not broken, "links that do not resolve inside the repository:\n" + "\n".join(broken)


# The project's design note and research notes live beside the repository, not in it: what the product
# needs from them is written into docs/. The strings are put together so that this file holds none.
OUTSIDE_DOCUMENT = re.compile(
    "|".join(
        re.escape(s)
        for s in (
            "DESIGN" + ".md",
            "shared" + "/notes",
            "../" + "shared/" + "DESIGN",
            "../" + "shared/" + "notes",
        )
    )
)


@pytest.mark.parametrize(
    ("line", "outside"),
    [
        ("Rules (see ../" + "shared/" + "notes/ldap-sssd.md for how others do it)", True),
        ("CSV (header in DESIGN" + ".md)", True),
        ("quirks (shared" + "/notes/scim.md)", True),
        ("quirks (docs/identity-providers.md)", False),
        ("the kube-router tarball in $SUP_THIRDPARTY_DIR", False),
    ],
)
def test_the_check_finds_documents_outside_the_repository(line: str, outside: bool) -> None:
    assert bool(OUTSIDE_DOCUMENT.search(line)) is outside


def test_no_tracked_file_refers_to_a_document_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in tracked_text_files()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE_DOCUMENT.search(line)
    ]
    assert not found, (
        "references to documents outside the repository (write what is needed into docs/):\n"
        + ("\n".join(found))
    )
