"""Who is provisioned (settings key `access`) and with which POSIX attributes (`accounts`)."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from sup.common.sections import Section
from sup.domain.homes import USERNAME_PLACEHOLDER, check_home, home_root


class AccountPolicy(Section):
    """Defaults and limits for POSIX account attributes (settings key `accounts`)."""

    home_template: str = Field(
        "/home/{username}",
        description="each person's home directory, {username} replaced by theirs: an absolute path; every "
        "home lies below its root (here /home), one per user, none nested in another",
    )
    default_shell: str = Field("/bin/bash", description="login shell when a source supplies none")
    allowed_shells: list[str] = Field(
        default_factory=lambda: [
            "/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh", "/bin/zsh", "/usr/bin/zsh",
            "/bin/tcsh", "/usr/bin/tcsh", "/usr/bin/fish", "/bin/dash", "/usr/bin/dash",
            "/usr/sbin/nologin", "/sbin/nologin", "/bin/false",
        ],
        description="the shells a person may have; default_shell and nologin_shell must be listed",
    )  # fmt: skip
    nologin_shell: str = Field("/usr/sbin/nologin", description="the shell of a locked (suspended) account")
    extra_reserved_names: list[str] = Field(
        default_factory=list, description="user and group names refused besides the built-in list"
    )
    max_ssh_keys: int = Field(
        32, ge=1, le=1000, description="SSH keys one person may hold (every origin together)"
    )
    # Every key of a person goes into each login pod they may use; a group pod's ConfigMap holds
    # 1 MiB for all its members. 32 KiB holds 32 RSA-4096 keys with comments; the ceiling keeps one
    # person's keys at a quarter of a ConfigMap at most.
    max_ssh_key_bytes: int = Field(
        32768,
        ge=1024,
        le=262144,
        description="bytes one person's SSH keys may take together (each line and its newline); at most "
        "262144, so one person never fills a login ConfigMap",
    )

    @field_validator("home_template")
    @classmethod
    def _home(cls, value: str) -> str:
        if not value.startswith("/") or USERNAME_PLACEHOLDER not in value:
            raise ValueError("home_template must be an absolute path containing {username}")
        # The homes it makes must pass the rule every home is held to (sup/domain/homes.py).
        check_home(value.replace(USERNAME_PLACEHOLDER, "user"), home_root(value))
        return value

    @model_validator(mode="after")
    def _shells(self) -> AccountPolicy:
        for shell in (self.default_shell, self.nologin_shell):
            if shell not in self.allowed_shells:
                raise ValueError(f"shell {shell} must be listed in allowed_shells")
        return self


class AccessPolicy(Section):
    """Who is provisioned at all (settings key `access`)."""

    groups: list[str] = Field(
        default_factory=list,
        description="if set, only members of these groups are provisioned; empty: every active user",
    )
