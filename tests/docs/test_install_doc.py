"""docs/install.md is real: every command in its ```sh blocks does what it says, as far as that can be
told without a cluster.

- The ```yaml blocks whose first line is `# file: PATH` are the files the reader saves; they are
  written to a temp dir, and every `helm install`/`helm upgrade` in the doc is run there as
  `helm template` with exactly its arguments (and `helm lint` with its values): the values files
  render. The settings SUP's ConfigMap then holds load in SUP.
- `sup ...` (also inside `kubectl exec ... --`): the subcommand exists and takes every option used.
- `kubectl`: each object it names is one the chart renders in that namespace (a Deployment to exec
  in or wait for, a Service to port-forward or read, the migration Job), or one the rendered chart
  or SUP's rendered settings read (each Secret and ConfigMap created, with the key it is read by);
  files applied are the doc's own, and what they point at exists (the Ingress's Service and port,
  the shared home claim SUP's settings name).
- `skopeo copy` pushes to exactly the image names the values use; `ssh -J` goes to the gateway's
  `public_host`; `curl` calls a route SUP serves; `helm history`/`rollback` name the release.
- Any other program must be one of a short list: a new command in the doc has to be looked at here.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from typer.testing import CliRunner

from sup.cli import app as sup_cli
from sup.config import Settings
from tests.support.helm import CHART, REPO

DOC = REPO / "docs" / "install.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")
# Programs the doc may run that this test cannot check further (the reader's own tools, or commands
# run in a login pod).
OTHER_PROGRAMS = {"createuser", "createdb", "sacctmgr", "ssh-keygen", "rm", "printf", "sbatch", "cat"}


@dataclass
class Doc:
    files: dict[str, str]
    commands: list[list[str]]


def parse_doc(text: str) -> Doc:
    files: dict[str, str] = {}
    commands: list[list[str]] = []
    for language, body in FENCE.findall(text):
        if language == "yaml":
            first, _, rest = body.partition("\n")
            marker = re.fullmatch(r"# file: (\S+)", first.strip())
            assert marker, f"a yaml block without a `# file: PATH` line: {first!r}"
            files[marker.group(1)] = rest
        elif language == "sh":
            commands += split_commands(body)
        else:
            raise AssertionError(f"a ```{language} block: install.md holds sh and yaml blocks only")
    return Doc(files, commands)


def split_commands(script: str) -> list[list[str]]:
    """Each simple command of a shell snippet as words: `$(...)` becomes a command of its own (and the
    word SUBSTITUTION in its place), `&&`, `|` and `;` separate commands, comments go."""
    commands: list[list[str]] = []
    script = script.replace("\\\n", " ")
    for inner in SUBSTITUTION.findall(script):
        commands += split_commands(inner)
    script = SUBSTITUTION.sub("SUBSTITUTION", script)
    for line in script.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current: list[str] = []
        for word in lexer:
            if word in {"&&", "||", "|", ";"}:
                commands.append(current)
                current = []
            else:
                current.append(word)
        commands.append(current)
    return [c for c in commands if c]


def options(words: list[str]) -> list[str]:
    return [w.split("=", 1)[0] for w in words if w.startswith("-") and w not in {"-", "--"}]


def take(words: list[str], *flags: str) -> list[str]:
    """The values of every `FLAG VALUE` / `FLAG=VALUE` among `words`."""
    found = []
    for i, word in enumerate(words):
        for flag in flags:
            if word == flag and i + 1 < len(words):
                found.append(words[i + 1])
            elif word.startswith(flag + "="):
                found.append(word[len(flag) + 1 :])
    return found


@dataclass
class Site:
    """What the doc's helm commands render, and what the rendered objects and settings refer to."""

    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)  # kind, ns, name
    reads: set[tuple[str, str, str, str | None]] = field(default_factory=set)  # kind, ns, name, key
    releases: dict[str, str] = field(default_factory=dict)  # release -> namespace
    values: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)  # SUP's, as the last install renders them
    every_settings: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # per install
    values_used: set[str] = field(default_factory=set)


def merge(into: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value
    return into


def walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def record_reads(site: Site, item: dict[str, Any], namespace: str) -> None:
    for node in walk(item):
        for kind, ref in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
            if isinstance(node.get(ref), dict):
                site.reads.add((kind, namespace, node[ref]["name"], node[ref].get("key")))
        volume_sources = (("Secret", "secret", "secretName"), ("ConfigMap", "configMap", "name"))
        for kind, source, name_key in volume_sources:
            volume = node.get(source)
            if isinstance(volume, dict) and name_key in volume:
                keys = [i["key"] for i in volume.get("items", [])] or [None]
                site.reads.update((kind, namespace, volume[name_key], k) for k in keys)


@pytest.fixture(scope="module")
def doc() -> Doc:
    return parse_doc(DOC.read_text())


@pytest.fixture(scope="module")
def workdir(doc: Doc, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("install-doc")
    for name, text in doc.files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "charts").symlink_to(CHART.parent)
    return root


def run_helm(binary: str, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, *args], cwd=workdir, capture_output=True, text=True, timeout=120, check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(workdir), "HELM_CACHE_HOME": "/tmp/sup-helm/cache",
             "HELM_CONFIG_HOME": "/tmp/sup-helm/config", "HELM_DATA_HOME": "/tmp/sup-helm/data"},
    )  # fmt: skip


@pytest.fixture(scope="module")
def site(doc: Doc, workdir: Path, helm_binary: str) -> Site:
    """Every `helm install`/`upgrade` of the doc, rendered with its own arguments, and linted."""
    site = Site()

    installs = [c for c in doc.commands if c[:2] in (["helm", "install"], ["helm", "upgrade"])]
    assert installs, "install.md installs nothing with helm"
    for words in installs:
        args = [w for w in words[2:] if w not in {"--install", "--wait", "--atomic"}]
        release, chart = args[0], args[1]
        assert (workdir / chart / "Chart.yaml").exists(), f"{chart} is not the chart: {words}"
        namespace = take(args, "-n", "--namespace")
        assert namespace, f"no -n: {words}"
        site.releases[release] = namespace[0]
        rendered = run_helm(helm_binary, workdir, "template", *args)
        assert rendered.returncode == 0, f"{' '.join(words)}:\n{rendered.stderr}"
        value_args = [a for flag in ("-f", "--values") for v in take(args, flag) for a in ("-f", v)]
        value_args += [a for v in take(args, "--set") for a in ("--set", v)]
        linted = run_helm(helm_binary, workdir, "lint", chart, "-n", namespace[0], *value_args)
        assert linted.returncode == 0, f"helm lint with the values of {' '.join(words)}:\n{linted.stdout}"
        values: dict[str, Any] = {}
        for path in take(args, "-f", "--values"):
            merge(values, yaml.safe_load((workdir / path).read_text()) or {})
            site.values_used.add(path)
        assert not take(args, "--set", "--set-json"), "keep the doc's values in its files"
        site.values = merge(site.values, values)
        for item in (d for d in yaml.safe_load_all(rendered.stdout) if d):
            item_ns = item["metadata"].get("namespace", namespace[0])
            site.objects[(item["kind"], item_ns, item["metadata"]["name"])] = item
            record_reads(site, item, item_ns)
        config = site.objects[("ConfigMap", namespace[0], release)]["data"]["sup.yaml"]
        site.settings = yaml.safe_load(config)
        site.every_settings.append((" ".join(words), site.settings))
    kube = site.settings.get("kube") or {}
    users: str = kube["namespace"]
    for key, kind, item in (
        ("slurm_config_map", "ConfigMap", "slurm.conf"),
        ("munge_key_secret", "Secret", "munge.key"),
        ("shared_home_claim", "PersistentVolumeClaim", None),
    ):
        if kube.get(key):
            site.reads.add((kind, users, kube[key], item))
    return site


def test_the_doc_has_values_for_every_target_and_commands(doc: Doc) -> None:
    values = {name for name in doc.files if name.startswith("values/")}
    assert {"values/base.yaml", "values/ldap.yaml", "values/slurm.yaml", "values/gateway.yaml"} <= values
    programs = {c[0] for c in doc.commands}
    assert {"helm", "kubectl", "sup", "skopeo", "ssh"} - {"sup"} <= programs


def test_every_values_file_is_installed(doc: Doc, site: Site) -> None:
    assert {name for name in doc.files if name.startswith("values/")} == site.values_used


def test_the_values_render_and_lint_and_sups_settings_load(
    site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUP_DATABASE_URL", "postgresql://sup@db.example.org/sup")
    for where, rendered_settings in site.every_settings:
        settings = dict(rendered_settings)
        kube = dict(settings.get("kube") or {})
        settings["kube"] = kube
        # the secrets the chart passes from Secrets, as the environment
        for section, variable in (
            ("ldap", "SUP_LDAP__BIND_PASSWORD"),
            ("keycloak", "SUP_KEYCLOAK__CLIENT_SECRET"),
        ):
            if section in settings:
                monkeypatch.setenv(variable, "from-the-secret")
            else:
                monkeypatch.delenv(variable, raising=False)
        path = tmp_path / "sup.yaml"
        path.write_text(yaml.safe_dump(settings))
        monkeypatch.setenv("SUP_CONFIG", str(path))
        try:
            loaded = Settings()
        except ValidationError as exc:
            raise AssertionError(f"SUP refuses the settings of {where}:\n{exc}") from None
        assert loaded.ldap is not None and loaded.slurm is not None and loaded.kube is not None, where
        assert loaded.gateway is not None and loaded.gateway.public_host, where


def test_every_command_is_real(doc: Doc, site: Site, workdir: Path, helm_binary: str) -> None:
    checked = 0
    for words in doc.commands:
        check_command(words, doc, site, workdir, helm_binary)
        checked += 1
    assert checked >= 30, checked


def check_command(words: list[str], doc: Doc, site: Site, workdir: Path, helm_binary: str) -> None:
    program, args = words[0], words[1:]
    where = " ".join(words)
    if program == "sup":
        check_sup(args, where)
    elif program == "kubectl":
        check_kubectl(args, doc, site, workdir, helm_binary, where)
    elif program == "helm":
        check_helm(args, site, workdir, helm_binary, where)
    elif program == "scripts/build-images":
        assert (REPO / program).is_file() and not args, where
    elif program == "skopeo":
        assert args[0] == "copy" and args[1].startswith("oci-archive:"), where
        pushed = args[2].removeprefix("docker://")
        image = site.values["image"]
        assert pushed in {f"{image['repository']}:{image['tag']}", site.settings["kube"]["image"]}, where
    elif program in {"ssh", "scp", "sftp"}:
        jump = take(args, "-J")
        public_host = site.settings["gateway"]["public_host"]
        assert jump and jump[0].split("@")[-1] == public_host, where
    elif program == "curl":
        check_curl(args, where)
    else:
        assert program in OTHER_PROGRAMS, f"a command this test does not know: {where}"


def check_sup(args: list[str], where: str) -> None:
    words = [a for a in args if not a.startswith("-")]
    subcommand: list[str] = []
    for word in words:  # the command path: the words before the first option
        if args.index(word) > len(subcommand):
            break
        subcommand.append(word)
    result = CliRunner().invoke(sup_cli, [*subcommand, "--help"], terminal_width=200)
    assert result.exit_code == 0, f"{where}: {result.output}"
    for option in options(args):
        assert re.search(rf"(^|\s){re.escape(option)}\b", result.output, re.MULTILINE), f"{where}: {option}"


def check_helm(args: list[str], site: Site, workdir: Path, helm_binary: str, where: str) -> None:
    if args[0] in {"install", "upgrade"}:
        return  # rendered and linted by the `site` fixture
    assert args[0] in {"history", "rollback"}, where
    assert site.releases.get(args[1]) == take(args, "-n", "--namespace")[0], where
    if args[0] == "rollback":
        assert args[2].isdigit(), where
    result = run_helm(helm_binary, workdir, args[0], "--help")
    assert result.returncode == 0, where


def rendered(site: Site, kind: str, namespace: str, name: str, where: str) -> dict[str, Any]:
    item = site.objects.get((kind, namespace, name))
    assert item is not None, f"{where}: the chart renders no {kind} {namespace}/{name}"
    return item


def check_kubectl(args: list[str], doc: Doc, site: Site, workdir: Path, helm_binary: str, where: str) -> None:
    given = take(args, "-n", "--namespace")
    namespace = given[0] if given else "default"
    rest = list(args)
    if given:
        at = rest.index("-n") if "-n" in rest else rest.index("--namespace")
        del rest[at : at + 2]
    verb = rest[0]
    kinds = {"deploy": "Deployment", "svc": "Service", "job": "Job", "statefulset": "StatefulSet"}
    users = site.settings["kube"]["namespace"]
    if rest[:2] == ["create", "namespace"]:
        assert rest[2] in site.releases.values(), where
    elif rest[:2] == ["create", "secret"] or rest[:2] == ["create", "configmap"]:
        kind = "Secret" if rest[1] == "secret" else "ConfigMap"
        name = rest[3] if kind == "Secret" else rest[2]
        assert kind == "ConfigMap" or rest[2] == "generic", where
        keys = [v.split("=", 1)[0] for v in take(rest, "--from-literal")]
        keys += [v.split("=", 1)[0] if "=" in v else Path(v).name for v in take(rest, "--from-file")]
        assert keys, where
        for key in keys:
            wanted = {(kind, namespace, name, key), (kind, namespace, name, None)}
            assert wanted & site.reads, f"{where}: nothing SUP's chart renders reads {kind} {name} key {key}"
    elif verb == "exec":
        target, _, inner = " ".join(rest[1:]).partition(" -- ")
        kind, name = target.split("/")
        rendered(site, kinds[kind], namespace, name, where)
        check_command(shlex.split(inner), doc, site, workdir, helm_binary)
    elif rest[:2] == ["rollout", "status"] or verb in {"logs", "port-forward"}:
        kind, name = rest[2 if verb == "rollout" else 1].split("/")
        item = rendered(site, kinds[kind], namespace, name, where)
        if verb == "port-forward":
            assert int(rest[2]) in {p["port"] for p in item["spec"]["ports"]}, where
    elif verb == "get":
        kind, name = kinds[rest[1]], rest[2]
        if kind == "StatefulSet":  # a login pod's, made by SUP in the users' namespace
            assert namespace == users and name.startswith("login-"), where
        else:
            rendered(site, kind, namespace, name, where)
    elif verb == "apply":
        (path,) = take(rest, "-f")
        assert path in doc.files, f"{where}: not a file of the doc"
        for item in yaml.safe_load_all(doc.files[path]):
            check_applied(item, site, where)
    else:
        raise AssertionError(f"a kubectl command this test does not know: {where}")


def check_applied(item: dict[str, Any], site: Site, where: str) -> None:
    namespace = item["metadata"]["namespace"]
    if item["kind"] == "Ingress":
        for rule in item["spec"]["rules"]:
            for path in rule["http"]["paths"]:
                backend = path["backend"]["service"]
                service = rendered(site, "Service", namespace, backend["name"], where)
                assert backend["port"]["number"] in {p["port"] for p in service["spec"]["ports"]}, where
                assert path["path"] == "/scim/v2", f"{where}: publish only what IdPs need"
    elif item["kind"] == "PersistentVolumeClaim":
        read = ("PersistentVolumeClaim", namespace, item["metadata"]["name"], None)
        assert read in site.reads, f"{where}: SUP's settings name no such claim"
        assert item["spec"]["accessModes"] == ["ReadWriteMany"], where
    else:
        raise AssertionError(f"{where}: a {item['kind']} this test does not know")


def check_curl(args: list[str], where: str) -> None:
    """The URL's path and method are an operation of SUP's OpenAPI document."""
    from sup.app import create_app

    (url,) = [a for a in args if a.startswith(("http://", "https://"))]
    path = "/" + url.split("://", 1)[1].split("/", 1)[1]
    method = (take(args, "-X") or ["POST" if take(args, "-d") else "GET"])[0].lower()
    settings = Settings(
        database_url="sqlite://",
        oidc={"issuer": "https://sso.example.org/realms/research", "audience": "sup"},
    )
    paths: dict[str, dict[str, Any]] = create_app(settings).openapi()["paths"]
    assert any(
        method in operations and re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path)
        for template, operations in paths.items()
    ), f"{where}: SUP serves no {method.upper()} {path}"


def test_the_command_splitter_reads_shell_as_the_doc_writes_it() -> None:
    script = 'a -x "$(b c --d e)" && f g \\\n  h # a comment\nk | l\n'
    assert split_commands(script) == [["b", "c", "--d", "e"], ["a", "-x", "SUBSTITUTION"], ["f", "g", "h"],
                                      ["k"], ["l"]]  # fmt: skip
