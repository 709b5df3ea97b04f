# Sourced by scripts/build-kube-apiserver and scripts/build-helm: `sup_go VERSION` prints the path of a
# `go` command at least that version. It is the `go` on PATH when that is new enough; otherwise the Go
# toolchain is fetched from the Go module proxy, where it is published as the module
# golang.org/toolchain (what `GOTOOLCHAIN` downloads), checked against a pinned SHA-256 and unpacked
# into the cache dir. Debian 12 ships go 1.19 and a fresh machine may have none at all.
# The proxy is the one the go command would use: $GOPROXY, else `go env GOPROXY` of the (older) go on
# PATH; with neither, set GOPROXY. Its entries are tried in order ("direct" and "off" are skipped: the
# toolchain is only published on a proxy). Needs only python3 (no curl, no unzip).

SUP_GO_VERSION="${SUP_GO_VERSION:-1.26.8}"
# SHA-256 of $GOPROXY/golang.org/toolchain/@v/v0.0.1-go$SUP_GO_VERSION.linux-$ARCH.zip
declare -A SUP_GO_SHA256=(
    [1.26.8-amd64]=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
    [1.26.8-arm64]=02b36b6787b3ac767668f630e2998df45a3b1f9ffee08d1bf3ef6487cd658d99
)

# _go_at_least GO WANT: is `GO version` >= WANT (e.g. 1.26.0)?
_go_at_least() {
    local have
    have="$("$1" env GOVERSION 2>/dev/null)" || return 1
    have="${have#go}"
    python3 - "$have" "$2" <<'PY'
import re, sys
def key(v):
    return [int(x) for x in re.findall(r"\d+", v)[:3]] + [0] * 3
sys.exit(0 if key(sys.argv[1])[:3] >= key(sys.argv[2])[:3] else 1)
PY
}

# _go_proxy: print the Go module proxy list as the go command sees it.
_go_proxy() {
    if [ -n "${GOPROXY:-}" ]; then
        printf '%s\n' "$GOPROXY"
    elif command -v go >/dev/null 2>&1; then
        go env GOPROXY
    else
        return 1
    fi
}

sup_go() {
    local want="$1" cache="${SUP_CACHE_DIR:-$HOME/.cache/sup}"
    if command -v go >/dev/null 2>&1 && _go_at_least go "$want"; then
        command -v go
        return 0
    fi
    local arch
    case "$(uname -m)" in
        x86_64) arch=amd64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) echo "sup_go: no pinned Go toolchain for $(uname -m); install go >= $want" >&2; return 1 ;;
    esac
    local module="golang.org/toolchain@v0.0.1-go$SUP_GO_VERSION.linux-$arch"
    local root="$cache/go-toolchain/$module"
    if [ ! -x "$root/bin/go" ]; then
        local sum="${SUP_GO_SHA256[$SUP_GO_VERSION-$arch]:-}"
        [ -n "$sum" ] || { echo "sup_go: no pinned checksum for go$SUP_GO_VERSION linux-$arch" >&2; return 1; }
        local proxies
        proxies="$(_go_proxy)" || {
            echo "sup_go: no go on PATH to ask for its module proxy; set GOPROXY, or install go >= $want" >&2
            return 1
        }
        echo "sup_go: fetching go$SUP_GO_VERSION (linux-$arch) from the Go module proxy ($proxies) into $cache" >&2
        mkdir -p "$cache/go-toolchain"
        python3 - "$SUP_GO_VERSION" "$arch" "$sum" "$cache/go-toolchain" "$proxies" <<'PY' >&2 || return 1
import hashlib, os, re, shutil, sys, tempfile, urllib.error, urllib.request, zipfile
version, arch, want, dest, proxies = sys.argv[1:]
# GOPROXY is a list separated by ',' (next on 404/410) or '|' (next on any error): try each in turn.
urls = [p.rstrip("/") for p in re.split(r"[,|]", proxies) if p.strip() and p.strip() not in ("direct", "off")]
if not urls:
    sys.exit(f"sup_go: GOPROXY={proxies!r} names no module proxy; set GOPROXY to one")
with tempfile.TemporaryFile() as tmp:
    for proxy in urls:
        url = f"{proxy.strip()}/golang.org/toolchain/@v/v0.0.1-go{version}.linux-{arch}.zip"
        try:
            # Any scheme GOPROXY allows (https, http, file): the pinned SHA-256 below is what is trusted.
            with urllib.request.urlopen(url, timeout=300) as response:  # noqa: S310
                tmp.seek(0)
                tmp.truncate()
                shutil.copyfileobj(response, tmp)
            break
        except (urllib.error.URLError, OSError) as exc:
            print(f"sup_go: {url}: {exc}", file=sys.stderr)
    else:
        sys.exit(f"sup_go: no module proxy in GOPROXY={proxies!r} has go{version} linux-{arch}")
    tmp.seek(0)
    digest = hashlib.sha256()
    for block in iter(lambda: tmp.read(1 << 20), b""):
        digest.update(block)
    if digest.hexdigest() != want:
        sys.exit(f"sup_go: {url} has SHA-256 {digest.hexdigest()}, expected {want}; not used")
    tmp.seek(0)
    staging = tempfile.mkdtemp(dir=dest)
    with zipfile.ZipFile(tmp) as archive:
        for info in archive.infolist():
            path = archive.extract(info, staging)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(path, mode)
    top = os.path.join(staging, "golang.org")
    final = os.path.join(dest, "golang.org")
    os.makedirs(final, exist_ok=True)
    for entry in os.listdir(top):
        target = os.path.join(final, entry)
        if os.path.exists(target):
            shutil.rmtree(target)
        os.rename(os.path.join(top, entry), target)
    shutil.rmtree(staging)
PY
    fi
    if ! _go_at_least "$root/bin/go" "$want"; then
        echo "sup_go: $root/bin/go is older than $want; raise SUP_GO_VERSION" >&2
        return 1
    fi
    echo "$root/bin/go"
}
