# Sourced by scripts/build-kube-apiserver and scripts/build-helm: `sup_go VERSION` prints the path of a
# `go` command at least that version. It is the `go` on PATH when that is new enough; otherwise the Go
# toolchain is fetched from the Go module proxy, where it is published as the module
# golang.org/toolchain (what `GOTOOLCHAIN` downloads), checked against a pinned SHA-256 and unpacked
# into the cache dir. Debian 12 ships go 1.19 and a fresh machine may have none at all.
# Needs only python3 (no curl, no unzip).

SUP_GO_VERSION="${SUP_GO_VERSION:-1.26.8}"
# SHA-256 of https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$SUP_GO_VERSION.linux-$ARCH.zip
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
        echo "sup_go: fetching go$SUP_GO_VERSION (linux-$arch) from the Go module proxy into $cache" >&2
        mkdir -p "$cache/go-toolchain"
        python3 - "$SUP_GO_VERSION" "$arch" "$sum" "$cache/go-toolchain" <<'PY' >&2 || return 1
import hashlib, os, shutil, sys, tempfile, urllib.request, zipfile
version, arch, want, dest = sys.argv[1:]
proxy = os.environ.get("GOPROXY", "https://proxy.golang.org").split(",")[0].split("|")[0]
if proxy in ("direct", "off"):
    proxy = "https://proxy.golang.org"
url = f"{proxy.rstrip('/')}/golang.org/toolchain/@v/v0.0.1-go{version}.linux-{arch}.zip"
with tempfile.TemporaryFile() as tmp:
    with urllib.request.urlopen(url, timeout=300) as response:  # noqa: S310 - a fixed https URL
        shutil.copyfileobj(response, tmp)
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
