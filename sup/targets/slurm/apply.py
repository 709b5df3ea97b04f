"""Applying a Slurm plan: batched sacctmgr calls, in order, verified where the outcome is unclear.

Changes are grouped into operations: one sacctmgr command whose only varying part is a comma-separated
list of names (users or accounts), e.g. every new association to account `phys` on cluster `gpu`
without a partition is one `add user a,b,c,... Account=phys Cluster=gpu`. Name lists are cut into
chunks of `chunk_size` names (and at most MAX_ARG_CHARS characters: Linux refuses longer arguments).

Phases run in order (accounts; associations; modifications; removals; within the removals, a
user's default account last). A change the plan marked `blocked` (an account naming a QoS slurmdbd
does not define, and what depends on it) fails with that reason and runs nothing. A call that exits 0 is taken
as done. Any other outcome -- a "nothing changed" text, an error, a timeout -- is ambiguous for a
batch: after the phase, the state is read again, and what the re-read shows done is done. What is
still missing is retried in halves until each failing change stands alone, so one user whose
association cannot be removed (jobs running) fails alone and the rest of the batch succeeds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from sup.targets.base import (
    ADD_MEMBERS,
    CREATE,
    DELETE,
    REMOVE_MEMBERS,
    REPORT,
    AnyDetails,
    ApplyReport,
    Failure,
)
from sup.targets.slurm.diff import ACCOUNT, ASSOCIATION, COORDINATOR, USER
from sup.targets.slurm.model import (
    BY_KEY,
    AccountCreate,
    AccountDelete,
    AccountLimits,
    AccountMove,
    AccountTexts,
    AdminLevel,
    AssociationChange,
    Coordinator,
    DefaultAccount,
    Limits,
    Observed,
    Remark,
    SlurmChange,
    parse_tres,
    same,
    tres_text,
)
from sup.targets.slurm.sacctmgr import Outcome, Result, Sacctmgr

log = logging.getLogger(__name__)

MAX_ARG_CHARS = 100_000  # below Linux's 128 KiB limit for one argument

# Phases, in apply order; each operation kind belongs to one.
PHASES: tuple[tuple[str, ...], ...] = (
    ("add_account",),
    ("add_user_default", "add_user"),
    (
        "move_account",
        "modify_account",
        "modify_account_text",
        "modify_association",
        "default_account",
        "admin_level",
        "add_coordinator",
    ),
    ("delete_coordinator", "delete_association", "delete_default_association", "delete_account"),
)
# Kinds that run after the rest of their phase, and only for users with no failure so far on the
# same cluster: a user's default account is never removed while another association of theirs stays
# (slurmdbd refused its removal: a job runs) or while the switch to a new default failed.
GUARDED = frozenset({"delete_default_association"})


@dataclass(frozen=True)
class Template:
    """A sacctmgr command with a hole for the comma-separated names: `before NAMES after`."""

    kind: str
    before: tuple[str, ...]
    name_format: str  # "{}" or "Name={}" / "Names={}"
    after: tuple[str, ...] = ()

    def argv(self, names: str) -> list[str]:
        return [*self.before, self.name_format.format(names), *self.after]


@dataclass
class Operation:
    """One command template and the changes it carries, each with the name it adds to the list."""

    template: Template
    items: list[tuple[str, SlurmChange]] = field(default_factory=list)


def set_options(limits: Limits) -> tuple[str, ...]:
    """The `set` part of a modify: each changed attribute's new value, or a reset to inherit."""
    inherit = set(limits.inherit)
    options = []
    for key, attr in BY_KEY.items():
        if key not in limits.changed:
            continue
        old, new = limits.changed[key].old, limits.changed[key].new
        if attr.kind == "tres":
            keep = {} if key in inherit else parse_tres(new or "")
            cleared = [f"{name}=-1" for name in sorted(parse_tres(old or "")) if name not in keep]
            value = ",".join(filter(None, [tres_text(keep), *cleared]))
            if value:
                options.append(f"{attr.option}={value}")
        elif key in inherit:
            options.append(f"{attr.option}=" if attr.kind == "qos" else f"{attr.option}=-1")
        else:
            options.append(f"{attr.option}={new if new is not None else -1}")
    return tuple(options)


def create_options(account: AccountCreate) -> tuple[str, ...]:
    """Attributes of a new account. Its texts are set apart (`text_options`): an `add account` call
    costs the same for 1 or 50 names, and only the texts differ from account to account."""
    own = account.own
    return tuple(f"{attr.option}={own[key]}" for key, attr in BY_KEY.items() if own.get(key))


def _texts(details: AccountCreate | AccountTexts) -> dict[str, str | None]:
    """Description and organization to set: a create's values or an update's new ones."""
    if isinstance(details, AccountCreate):
        values = {"description": details.description, "organization": details.organization}
        return {key: value for key, value in values.items() if value is not None}
    changes = {"description": details.description, "organization": details.organization}
    return {key: change.new for key, change in changes.items() if change is not None}


def text_options(details: AccountCreate | AccountTexts) -> tuple[str, ...]:
    """Description=/Organization= from a create's values or an update's new values."""
    return tuple(f"{key.capitalize()}={value}" for key, value in _texts(details).items())


def _account_templates(change: SlurmChange) -> list[tuple[Template, str]]:
    d = change.details
    where = ("modify", "account", "where")
    after: tuple[str, ...]
    if isinstance(d, AccountCreate):
        after = (f"Cluster={d.cluster}", f"Parent={d.parent}", *create_options(d))
        found = [(Template("add_account", ("add", "account"), "{}", after), change.name)]
        texts = text_options(d)
        if texts:
            found.append((Template("modify_account_text", where, "Name={}", ("set", *texts)), change.name))
        return found
    if isinstance(d, AccountDelete):
        # One template per depth: children go before their parents.
        kind = f"delete_account:{d.depth:04d}"
        after = (f"Cluster={d.cluster}",)
        return [(Template(kind, ("delete", "account", "where"), "Name={}", after), change.name)]
    if isinstance(d, AccountMove):
        after = (f"Cluster={d.cluster}", "set", f"Parent={d.parent.new}")
        return [(Template("move_account", where, "Name={}", after), change.name)]
    if isinstance(d, AccountTexts):
        after = ("set", *text_options(d))
        return [(Template("modify_account_text", where, "Name={}", after), change.name)]
    if isinstance(d, AccountLimits):
        after = (f"Cluster={d.cluster}", "set", *set_options(d.limits))
        return [(Template("modify_account", where, "Name={}", after), change.name)]
    raise _cannot_apply(change)


def _association_template(change: SlurmChange, d: AssociationChange) -> tuple[Template, str]:
    cluster, account, user, part = d.cluster, d.account, d.user, d.partition
    if change.action == CREATE:
        after: tuple[str, ...] = (f"Account={account}", f"Cluster={cluster}")
        after += (f"Partition={part}",) if part else ()
        after += (f"Fairshare={d.fairshare}",) if d.fairshare is not None else ()
        after += (f"DefaultAccount={account}",) if d.default_account else ()
        kind = "add_user_default" if d.default_account else "add_user"
        return Template(kind, ("add", "user"), "{}", after), user
    # "Partition=" (empty) selects the association without a partition, not all of them.
    where: tuple[str, ...] = (f"Account={account}", f"Cluster={cluster}", f"Partition={part}")
    if change.action == DELETE:
        kind = "delete_default_association" if d.default_account else "delete_association"
        return Template(kind, ("delete", "user", "where"), "Name={}", where), user
    if d.limits is None:
        raise _cannot_apply(change)
    after = (*where, "set", *set_options(d.limits))
    return Template("modify_association", ("modify", "user", "where"), "Name={}", after), user


def _templates(change: SlurmChange) -> list[tuple[Template, str]]:
    """The commands that carry this change, each with the name it contributes (none for a report)."""
    if change.action == REPORT:
        return []
    if change.kind == ACCOUNT:
        return _account_templates(change)
    return [_template(change)]


def _template(change: SlurmChange) -> tuple[Template, str]:
    d = change.details
    if change.kind == ASSOCIATION and isinstance(d, AssociationChange):
        return _association_template(change, d)
    after: tuple[str, ...]
    if change.kind == USER and isinstance(d, DefaultAccount):
        after = (f"Cluster={d.cluster}", "set", f"DefaultAccount={d.default_account.new}")
        return Template("default_account", ("modify", "user", "where"), "Name={}", after), change.name
    if change.kind == USER and isinstance(d, AdminLevel):
        after = ("set", f"AdminLevel={d.admin_level.new}")
        return Template("admin_level", ("modify", "user", "where"), "Name={}", after), change.name
    if (
        change.kind == COORDINATOR
        and change.action in (ADD_MEMBERS, REMOVE_MEMBERS)
        and isinstance(d, Coordinator)
    ):
        verb = "add" if change.action == ADD_MEMBERS else "delete"
        kind = f"{verb}_coordinator"
        return Template(kind, (verb, "coordinator", f"Account={d.account}"), "Names={}"), d.user
    raise _cannot_apply(change)


def _cannot_apply(change: SlurmChange) -> ValueError:
    return ValueError(f"the slurm target cannot apply {change.action} {change.kind} {change.name}")


def _rank(kind: str) -> tuple[int, int, int]:
    """(phase, position in the phase, order within the kind): accounts to delete go deepest first
    (their depth is part of the kind, e.g. "delete_account:0002")."""
    base, _, depth = kind.partition(":")
    for number, kinds in enumerate(PHASES):
        if base in kinds:
            return (number, kinds.index(base), -int(depth) if depth else 0)
    raise ValueError(kind)


def operations(changes: Sequence[SlurmChange]) -> list[list[Operation]]:
    """Group changes by command template, per phase, keeping the order of the changes within a kind
    (the diff lists parents first)."""
    by_template: dict[Template, Operation] = {}
    for change in changes:
        for template, name in _templates(change):
            by_template.setdefault(template, Operation(template)).items.append((name, change))
    ordered = sorted(by_template.values(), key=lambda op: _rank(op.template.kind))  # stable
    return [[op for op in ordered if _rank(op.template.kind)[0] == number] for number in range(len(PHASES))]


def _steps(phase: list[Operation]) -> list[list[Operation]]:
    """The operations of a phase in runs: a GUARDED kind runs once what precedes it is done."""
    steps: list[list[Operation]] = []
    for op in phase:
        guarded = op.template.kind in GUARDED
        if not steps or guarded != (steps[-1][0].template.kind in GUARDED):
            steps.append([])
        steps[-1].append(op)
    return steps


def chunks(items: Sequence[tuple[str, SlurmChange]], size: int) -> Iterator[list[tuple[str, SlurmChange]]]:
    """Runs of at most `size` distinct names and MAX_ARG_CHARS characters."""
    current: list[tuple[str, SlurmChange]] = []
    names: set[str] = set()
    length = 0
    for name, change in items:
        if name not in names and (len(names) >= size or length + len(name) + 1 > MAX_ARG_CHARS):
            yield current
            current, names, length = [], set(), 0
        current.append((name, change))
        if name not in names:
            names.add(name)
            length += len(name) + 1
    if current:
        yield current


def joined(items: Sequence[tuple[str, SlurmChange]]) -> str:
    return ",".join(dict.fromkeys(name for name, _ in items))


# --- verification ------------------------------------------------------------------------------------


def satisfied(change: SlurmChange, observed: Observed) -> bool:
    """Does the (re-read) state show this change as done?"""
    d = change.details
    if isinstance(d, AccountTexts | AccountCreate):
        info = observed.accounts.get(change.name)
        texts_ok = info is not None and all(
            getattr(info, k).casefold() == str(v).casefold() for k, v in _texts(d).items()
        )
        if isinstance(d, AccountTexts):
            return texts_ok
        row = observed.clusters[d.cluster].accounts.get(change.name)
        return row is not None and row.parent == d.parent and (texts_ok or not _texts(d))
    if isinstance(d, AccountDelete):
        return observed.clusters[d.cluster].accounts.get(change.name) is None
    if isinstance(d, AccountMove | AccountLimits):
        row = observed.clusters[d.cluster].accounts.get(change.name)
        if row is None:
            return False
        if isinstance(d, AccountMove):
            return row.parent == d.parent.new
        return all(
            same(attr.kind, row.values.get(key, ""), d.limits.changed[key].new)
            for key, attr in BY_KEY.items()
            if key in d.limits.changed
        )
    if isinstance(d, AssociationChange):
        return _association_satisfied(change, d, observed)
    if isinstance(d, DefaultAccount):
        return observed.clusters[d.cluster].defaults.get(change.name) == d.default_account.new
    if isinstance(d, AdminLevel):
        return observed.admin_levels.get(change.name, "None").casefold() == str(d.admin_level.new).casefold()
    if isinstance(d, Coordinator):
        info = observed.accounts.get(d.account)
        present = info is not None and d.user in info.coordinators
        return present if change.action == ADD_MEMBERS else not present
    return change.action == REPORT


def _association_satisfied(change: SlurmChange, d: AssociationChange, observed: Observed) -> bool:
    state = observed.clusters[d.cluster]
    row = state.users.get((d.account, d.user, d.partition))
    if change.action == CREATE:
        return row is not None
    if change.action == DELETE:
        return row is None
    account_row = state.accounts.get(d.account)
    if row is None or account_row is None or d.limits is None:
        return False
    inherit = set(d.limits.inherit)
    for name, attr in BY_KEY.items():
        if name not in d.limits.changed:
            continue
        new = d.limits.changed[name].new
        want = account_row.values.get(name, "") if attr.inherited and name in inherit else new
        if not same(attr.kind, row.values.get(name, ""), want):
            return False
    return True


# --- running -----------------------------------------------------------------------------------------


@dataclass
class _Batch:
    operation: Operation
    items: list[tuple[str, SlurmChange]]
    message: str | None = None  # what sacctmgr said when this batch did not plainly succeed


class Applier:
    """Runs the operations of a plan; a change carried by several commands (a new account and its
    texts) is applied when all of them are, and fails with the first error of any."""

    def __init__(self, sacctmgr: Sacctmgr, chunk_size: int, reread: Callable[[], Observed]) -> None:
        self.sacctmgr = sacctmgr
        self.chunk_size = chunk_size
        self.reread = reread
        self.calls: list[Result] = []
        self._failed: dict[int, Failure] = {}
        self._done: set[int] = set()

    def run(self, changes: Sequence[SlurmChange]) -> ApplyReport:
        runnable = []
        for change in changes:
            blocked = getattr(change.details, "blocked", None)
            if blocked:  # the plan knows sacctmgr would refuse it (diff.py): it fails here, unrun
                self._fail(change, blocked)
            else:
                runnable.append(change)
        for phase in operations(runnable):
            for step in _steps(phase):
                guarded = step[0].template.kind in GUARDED
                batches = [
                    _Batch(op, chunk)
                    for op in step
                    for chunk in chunks(self._cleared(op.items) if guarded else op.items, self.chunk_size)
                ]
                self._phase([batch for batch in batches if batch.items])
        report = ApplyReport()
        for change in changes:
            if id(change) in self._failed:
                report.failed.append(self._failed[id(change)])
            elif id(change) in self._done:
                report.applied.append(change)
        return report

    def _cleared(self, items: list[tuple[str, SlurmChange]]) -> list[tuple[str, SlurmChange]]:
        """The items whose user has no failed change on the same cluster; the others fail here."""
        failed: dict[tuple[str | None, str | None], Failure] = {}
        for failure in self._failed.values():
            failed.setdefault((failure.change.subject, _cluster_of(failure.change.details)), failure)
        cleared = []
        for name, change in items:
            cause = failed.get((change.subject, _cluster_of(change.details)))
            if cause is None:
                cleared.append((name, change))
                continue
            self._fail(
                change,
                "kept: the user's default account goes last, once their other changes on this "
                f"cluster went through ({cause.change.name}: {cause.error})",
            )
        return cleared

    def _execute(self, batch: _Batch) -> bool:
        result = self.sacctmgr.write(batch.operation.template.argv(joined(batch.items)))
        self.calls.append(result)
        if result.outcome is Outcome.OK:
            return True
        batch.message = result.message
        if result.outcome is Outcome.ERROR:
            log.info("sacctmgr %s: %s", batch.operation.template.kind, result.message)
        return False

    def _fail(self, change: SlurmChange, message: str | None) -> None:
        error = message or "sacctmgr reported success, yet slurmdbd does not show it"
        if message and message.lower().startswith(("nothing", "request didn't")):
            error = f"sacctmgr changed nothing and slurmdbd still differs ({message})"
        self._failed.setdefault(id(change), Failure(change, error))

    def _phase(self, batches: list[_Batch]) -> None:
        while batches:
            unsure = []
            for batch in batches:
                if self._execute(batch):
                    self._done.update(id(change) for _, change in batch.items)
                else:
                    unsure.append(batch)
            if not unsure:
                return
            observed = self.reread()  # an ObserveError here stops the pass: nothing is guessed
            batches = []
            for batch in unsure:
                missing = []
                for item in batch.items:
                    if satisfied(item[1], observed):
                        self._done.add(id(item[1]))
                    else:
                        missing.append(item)
                names = list(dict.fromkeys(name for name, _ in missing))
                if len(names) > 1:  # split until a failing change stands alone
                    half = set(names[: len(names) // 2])
                    batches.append(_Batch(batch.operation, [i for i in missing if i[0] in half]))
                    batches.append(_Batch(batch.operation, [i for i in missing if i[0] not in half]))
                    continue
                for _, change in missing:
                    self._fail(change, batch.message)


def _cluster_of(details: AnyDetails) -> str | None:
    """The cluster a change is about; None for the global ones (texts, admin levels, coordinators)."""
    per_cluster = (
        AccountCreate | AccountMove | AccountLimits | AccountDelete | AssociationChange | DefaultAccount
    )
    if isinstance(details, per_cluster | Remark):
        return details.cluster
    return None
