"""What a login pod knows about the people who may log in to it (pure): the files of its ConfigMap.

A login pod mounts a ConfigMap of SUP's, named like its StatefulSet, read-only at /etc/sup/login:
- `passwd`: one /etc/passwd line per person who may log in (a user's pod: that user; a group's pod:
  the group's active members), sorted by name;
- `group`: one /etc/group line per group those people are in: each person's primary group (their
  private group) and every group of SUP's they are a member of, sorted by name; a line lists only
  the members who are in `passwd` (nobody else is known to the pod);
- `USERNAME.keys` per person: their SSH public keys, one authorized_keys line each, sorted and
  without duplicates (as the LDAP target writes `sshPublicKey`); none at all when the desired state
  says login pods take certificates only (`plain_keys_in_login_pods`, from `ssh_ca.plain_keys:
  false`): sshd then finds no keys file and takes only certificates of the CAs below;
- `sup-ssh-ca.pub`, when SUP signs SSH certificates (ssh_ca): the CA public keys sshd trusts
  (TrustedUserCAKeys; a certificate is taken for the account its principal names).

The login image links /etc/passwd.cache and /etc/group.cache to the first two and reads them with
libnss-cache (`passwd: files cache`), so `id`, `ls -l` and Slurm's commands resolve SUP's names
without a daemon or root; sshd reads `AuthorizedKeysFile /etc/sup/login/%u.keys`. The kubelet
refreshes a mounted ConfigMap in place: a key or membership change reaches the running pod without
a restart (the StatefulSet does not change).

Rendered here rather than from a template: the files are a format the image parses, not a site's
choice, and every byte of them comes from the directory; one Python pass over a person's groups is
also what keeps 10,000 of them cheap (bench/kube_bench.py).

A person whose passwd fields would break a line (a ':' or a control character in a home directory or
shell stored before SUP checked them) is left out, and the caller reports it. A key whose line is not
printable (a control, bidi or other invisible character in its comment, stored before SUP refused
them at the API: sup/domain/sshkeys.py) is left out of the person's keys file, and reported too.

A group pod's files hold every member's keys, and a ConfigMap holds 1 MiB. When they would not fit,
`LoginFiles.within` leaves out the largest key files, one at a time, until they do: the people whose
keys push the ConfigMap over cannot log in to that pod with a key (each is reported), everyone else
still gets their key changes (before, the whole ConfigMap was refused, and then deleted as not
wanted). The per-person caps at the API (`accounts.max_ssh_keys`, `accounts.max_ssh_key_bytes`) keep
one person from getting there alone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from sup.domain.desired import DesiredGroup, DesiredState, DesiredUser
from sup.domain.sshkeys import printable

PASSWD = "passwd"  # noqa: S105 - the file name, not a password
GROUP = "group"
KEYS_SUFFIX = ".keys"
# The CA public keys whose certificates sshd takes (TrustedUserCAKeys), when SUP signs certificates:
# not a `.keys` name, so no username can clash with it.
TRUSTED_CA_KEYS = "sup-ssh-ca.pub"
# A ConfigMap holds at most 1 MiB (data and metadata); leave room for the metadata.
MAX_BYTES = 1_000_000


def keys_file(username: str) -> str:
    """The ConfigMap key (and file name under /etc/sup/login) of a person's authorized_keys."""
    return f"{username}{KEYS_SUFFIX}"


def _unsafe(value: str) -> bool:
    return ":" in value or any(not c.isprintable() for c in value)


def passwd_line(user: DesiredUser) -> str:
    """`name:x:uid:gid:gecos:home:shell`; the gecos follows the domain's rule (ASCII, no ':')."""
    return (
        f"{user.username}:x:{user.uid_number}:{user.gid_number}:{user.gecos}:"
        f"{user.home_directory}:{user.login_shell}"
    )


def group_line(group: DesiredGroup, members: Iterable[str]) -> str:
    """`name:x:gid:member1,member2` with the members sorted."""
    return f"{group.name}:x:{group.gid_number}:{','.join(sorted(members))}"


def authorized_keys(user: DesiredUser) -> tuple[str, int]:
    """One key a line, sorted, without duplicates, and how many keys were dropped: a key that is
    not printable (a line break in it would add a line of somebody's choosing, a bidi character
    shows it as another)."""
    lines = {key.strip() for key in user.ssh_public_keys} - {""}
    keys = sorted(line for line in lines if printable(line))
    return "".join(f"{key}\n" for key in keys), len(lines) - len(keys)


def _entry_size(name: str, value: str) -> int:
    return len(name.encode()) + len(value.encode())


@dataclass(frozen=True)
class LoginFiles:
    """The ConfigMap's data, and the people left out of it with the reason."""

    data: dict[str, str]
    refused: dict[str, str] = field(default_factory=dict)
    # People in passwd some or all of whose keys are not in their keys file, with the reason.
    keys_left_out: dict[str, str] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(_entry_size(k, v) for k, v in self.data.items())

    def within(self, limit: int = MAX_BYTES) -> LoginFiles:
        """These files with the largest key files left out until they take at most `limit` bytes:
        the most bytes first, ties by name (the same people every pass). Each person left out is
        in `keys_left_out`. Files that would not fit even without any key file come back as they
        are (the caller refuses them whole)."""
        size = self.size
        key_files = [name for name in self.data if name.endswith(KEYS_SUFFIX)]
        if size <= limit or size - sum(_entry_size(n, self.data[n]) for n in key_files) > limit:
            return self
        data = dict(self.data)
        left_out = dict(self.keys_left_out)
        for name in sorted(key_files, key=lambda n: (-_entry_size(n, data[n]), n)):
            if size <= limit:
                break
            entry = _entry_size(name, data.pop(name))
            person = name.removesuffix(KEYS_SUFFIX)
            reason = (
                f"the SSH keys of {person} ({entry} bytes) are left out of this login pod's files: with "
                f"every member's keys they take {self.size} bytes, more than a ConfigMap holds "
                f"({limit}), and the largest key sets are left out first; {person} cannot log in to "
                "this pod with a key until they hold fewer or shorter keys"
            )
            left_out[person] = f"{left_out[person]}; {reason}" if person in left_out else reason
            size -= entry
        return LoginFiles(data, dict(self.refused), left_out)

    def digest(self) -> str:
        """A hash of the data: what the memo remembers instead of the files themselves."""
        hashed = hashlib.sha256()
        for name in sorted(self.data):
            hashed.update(name.encode() + b"\0" + self.data[name].encode() + b"\0")
        return hashed.hexdigest()


# A desired state with fewer users than this share of its groups (a pass scoped to a few users)
# indexes only their groups: the index of every group's members took 0.3-0.4 s at 50,000 people,
# in every pass after a write, beside the targets a login waits for.
FEW_USERS_SHARE = 0.1


def _groups_of(desired: DesiredState) -> Iterable[DesiredGroup]:
    """The groups login files may name for `desired.users`: all, or for a few users only the
    groups they are members of or whose gid is a primary gid of theirs."""
    if len(desired.users) >= FEW_USERS_SHARE * len(desired.groups):
        return desired.groups.values()
    names = set(desired.users)
    gids = {user.gid_number for user in desired.users.values()}
    return [g for g in desired.groups.values() if g.gid_number in gids or not names.isdisjoint(g.members)]


class Directory:
    """The desired state indexed for login files: groups by member and by gid, built once a pass."""

    def __init__(self, desired: DesiredState) -> None:
        self.users: Mapping[str, DesiredUser] = desired.users
        self.trusted_ca_keys = "".join(f"{line}\n" for line in desired.ssh_user_ca_keys)
        self.plain_keys = desired.plain_keys_in_login_pods
        self._by_member: dict[str, list[DesiredGroup]] = {}
        self._by_gid: dict[int, list[DesiredGroup]] = {}
        for group in sorted(_groups_of(desired), key=lambda group: group.name):
            self._by_gid.setdefault(group.gid_number, []).append(group)
            for member in group.members:
                self._by_member.setdefault(member, []).append(group)

    def supplemental_gids(self, user: DesiredUser) -> tuple[int, ...]:
        """The gids of the groups `user` is a member of, besides their primary group: a user's pod
        runs with them (`supplementalGroups`), because sshd running as the user cannot set them."""
        gids = {group.gid_number for group in self._by_member.get(user.username, ())}
        gids.discard(user.gid_number)
        return tuple(sorted(gids))

    def files(self, people: Iterable[DesiredUser]) -> LoginFiles:
        """The files for a pod that these people may log in to."""
        admitted: dict[str, DesiredUser] = {}
        refused: dict[str, str] = {}
        for person in people:
            bad = [
                what
                for what, value in (
                    ("home directory", person.home_directory),
                    ("login shell", person.login_shell),
                )
                if _unsafe(value)
            ]
            if bad:
                refused[person.username] = (
                    f"the {' and '.join(bad)} of {person.username} contains ':' or a control "
                    "character, which would break their passwd line; they are left out of the login "
                    "pod's passwd until it is changed"
                )
            else:
                admitted[person.username] = person
        groups: dict[str, DesiredGroup] = {}
        for person in admitted.values():
            for group in (
                *self._by_gid.get(person.gid_number, ()),
                *self._by_member.get(person.username, ()),
            ):
                groups[group.name] = group
        passwd = "".join(f"{passwd_line(admitted[name])}\n" for name in sorted(admitted))
        group_text = "".join(
            f"{group_line(groups[name], groups[name].members & set(admitted))}\n" for name in sorted(groups)
        )
        data = {PASSWD: passwd, GROUP: group_text}
        if self.trusted_ca_keys:
            data[TRUSTED_CA_KEYS] = self.trusted_ca_keys
        left_out = self._add_keys(data, admitted) if self.plain_keys else {}
        return LoginFiles(data, refused, left_out)

    @staticmethod
    def _add_keys(data: dict[str, str], admitted: Mapping[str, DesiredUser]) -> dict[str, str]:
        """Each person's keys file into `data`; the people some of whose keys were left out, why."""
        left_out: dict[str, str] = {}
        for name in sorted(admitted):
            data[keys_file(name)], dropped = authorized_keys(admitted[name])
            if dropped:
                left_out[name] = (
                    f"{dropped} SSH key(s) of {name} hold a control, bidi or other invisible character "
                    "(stored before SUP refused such keys) and are left out of the login pod's keys "
                    "file; the SSH gateway refuses them too: replace them with keys without it"
                )
        return left_out
