"""`sup sssd-config`: the sssd.conf for login and compute nodes, matching the `ldap` settings."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from sup.cli.common import Exit, context, err, fail


def sssd_config(
    output: Path | None = typer.Option(
        None, "--output", "-o", help="write here (mode 0600, as sssd requires) instead of standard output"
    ),
    domain: str = typer.Option("sup", "--domain", help="the sssd domain name"),
    template: Path | None = typer.Option(
        None, "--template", help="a string.Template of your own instead of the shipped sssd.conf.template"
    ),
    option: list[str] = typer.Option(
        None, "--option", help="KEY=VALUE in the domain section, or SECTION:KEY=VALUE; repeat for several"
    ),
    bind_dn: str | None = typer.Option(
        None, "--bind-dn", help="a read-only DN for sssd (default: anonymous); never SUP's own"
    ),
    bind_password_file: Path | None = typer.Option(
        None, "--bind-password-file", help="a file holding --bind-dn's password"
    ),
) -> None:
    """Print the sssd.conf that makes nodes read what the LDAP target writes (nss, pam, ssh, sudo)."""
    from sup.targets.ldap import SPEC, SssdConfigError, render_sssd_config

    cli = context()
    ldap = cli.settings.target_settings(SPEC)
    if ldap is None:
        fail(
            "the ldap target is not configured (SUP_LDAP__URL, ...): nothing to point sssd at", Exit.NOT_READY
        )
    if bind_dn is not None and ldap.bind_dn.lower() == bind_dn.lower():
        fail("--bind-dn is SUP's own bind DN, which may write; give sssd a read-only one", Exit.INVALID)
    try:
        text = template.read_text() if template is not None else None
        password = bind_password_file.read_text().strip() if bind_password_file is not None else None
    except OSError as exc:
        fail(f"cannot read {exc.filename}: {exc.strerror}", Exit.INVALID)
    if password is not None and bind_dn is None:
        fail("--bind-password-file needs --bind-dn", Exit.USAGE)
    try:
        config = render_sssd_config(
            ldap, domain=domain, template=text, bind_dn=bind_dn, bind_password=password, options=option or []
        )
    except SssdConfigError as exc:
        fail(str(exc), Exit.INVALID)
    if output is None:
        typer.echo(config, nl=False)
        return
    try:
        descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            os.fchmod(handle.fileno(), 0o600)
            handle.write(config)
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror}", Exit.ERROR)
    err.print(f"wrote {output} (mode 0600)", highlight=False, markup=False)
