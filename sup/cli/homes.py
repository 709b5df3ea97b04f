"""`sup homes serve` and `sup homes sync --once`: the home directory maker (docs/homes.md) from the
`home_dirs` settings section. No database and no target section: it reads SUP's login ConfigMaps
(or, with --passwd, a file of passwd lines) and makes the directories on the shared volume.

Exit codes of `sync --once`: 0 every home is its person's, 8 something was refused or failed (each
logged with the path and why), 6 the settings or the mount are not ready."""

from __future__ import annotations

from pathlib import Path

import typer

from sup.cli.common import Exit, fail, settings_or_exit
from sup.cli.output import Format, output_option, print_data
from sup.config.home_dirs import HomeDirsSettings

app = typer.Typer(help="The home directory maker for kube.home_mode shared (docs/homes.md).")


def _section(log_level: str) -> HomeDirsSettings:
    from sup import logs

    settings = settings_or_exit()
    if settings.home_dirs is None:
        fail("no `home_dirs` settings section: the home directory maker is not configured", Exit.NOT_READY)
    logs.configure(settings.log.format, log_level)
    return settings.home_dirs


@app.command()
def sync(
    once: bool = typer.Option(
        False, "--once", help="one pass, then exit (required: `sup homes serve` keeps running)"
    ),
    passwd: Path | None = typer.Option(
        None, "--passwd", help="read the people from this file of passwd lines instead of the API server"
    ),
    log_level: str = typer.Option("info", "--log-level", help="log level (debug, info, warning, error)"),
    output: Format = output_option(),
) -> None:
    """One pass: make, fix and move every wanted home; exit 8 if anything was refused. Prints the
    counts (name=count); with -o json or yaml also the paths made, fixed and moved and each refusal
    (the log on stderr says the same)."""
    from sup.home_dirs.quota import QuotaError
    from sup.home_dirs.service import Memo, report
    from sup.home_dirs.service import sync as sync_pass

    if not once:
        fail("`sup homes sync` makes one pass: say --once (`sup homes serve` keeps running)", Exit.USAGE)
    section = _section(log_level)
    if passwd is not None:
        try:
            files = {str(passwd): passwd.read_text(encoding="utf-8")}
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read {passwd}: {exc}", Exit.NOT_READY)
    else:
        files = _listed(section)
    memo = Memo()
    try:
        outcome = sync_pass(section, files, memo)
    except (OSError, QuotaError) as exc:
        fail(f"the pass failed: {exc}", Exit.NOT_READY)
    report(outcome, memo, every=True)
    data = {
        "counts": outcome.counts(),
        "made": outcome.made,
        "fixed": outcome.fixed,
        "moved": outcome.moved,
        "refused": [{"what": r.what, "reason": r.reason} for r in outcome.refused],
    }
    if not print_data(data, output):
        typer.echo(" ".join(f"{name}={count}" for name, count in outcome.counts().items()))
    if outcome.refused:
        raise typer.Exit(int(Exit.TARGET_FAILED))


def _listed(section: HomeDirsSettings) -> dict[str, str]:
    from sup.home_dirs.source import ConfigMaps
    from sup.targets.base import TargetError

    try:
        source = ConfigMaps(section)
    except TargetError as exc:
        fail(str(exc), Exit.NOT_READY)
    try:
        return source.list()[0]
    except Exception as exc:  # KubeApiError: unreachable, forbidden
        fail(f"cannot list the login ConfigMaps in {section.namespace}: {exc}", Exit.TARGET_FAILED)
    finally:
        source.close()


@app.command()
def serve(
    log_level: str = typer.Option("info", "--log-level", help="log level (debug, info, warning, error)"),
) -> None:
    """Keep every person's home: a pass on start, on each change of a login ConfigMap, and every
    home_dirs.resync_seconds. Runs as root with CAP_CHOWN and CAP_FOWNER (+ CAP_SYS_ADMIN for XFS
    quotas) in the chart's `<release>-homes` Deployment."""
    import logging

    from prometheus_client import start_http_server

    from sup.home_dirs.service import Server
    from sup.home_dirs.source import ConfigMaps
    from sup.targets.base import TargetError

    section = _section(log_level)
    if not Path(section.mount).is_dir():
        fail(
            f"home_dirs.mount {section.mount} is not a directory (is the shared claim mounted?)",
            Exit.NOT_READY,
        )
    try:
        source = ConfigMaps(section)
    except TargetError as exc:
        fail(str(exc), Exit.NOT_READY)
    if section.metrics_port is not None:
        start_http_server(section.metrics_port)
    logging.getLogger("sup.home_dirs").info(
        "making homes under %s (the nodes' %s) for the login ConfigMaps of %s",
        section.mount, section.home_root, section.namespace,
    )  # fmt: skip
    try:
        Server(section, source).run()
    finally:
        source.close()
