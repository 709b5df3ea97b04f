"""`sup ssh login`: the researchers' login (sup/ssh_login.py, which also runs on its own)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from sup import ssh_login

app = typer.Typer(help="SSH certificates from SUP's CA (docs/ssh-certificates.md).")


@app.command()
def login(
    sup_url: str = typer.Argument(..., help="your cluster's SUP, e.g. https://sup.example.org"),
    key: Path = typer.Option(
        Path.home() / ".ssh" / "id_ed25519", "--key", help="your key (made when missing)"
    ),
    host: str = typer.Option("cluster", "--host", help="the name you will ssh to"),
    ssh_config: Path = typer.Option(
        Path.home() / ".ssh" / "config", "--ssh-config", help="the ssh config file"
    ),
    no_browser: bool = typer.Option(False, "--no-browser", help="only print the link"),
) -> None:
    """Sign in with the identity provider (a code to approve in the browser), get a short-lived
    certificate for your key and an ssh config block: then `ssh cluster`."""
    argv = [sup_url, "--key", str(key), "--host", host, "--ssh-config", str(ssh_config)]
    code = ssh_login.main([*argv, *(["--no-browser"] if no_browser else [])])
    sys.stdout.flush()
    raise typer.Exit(code)
