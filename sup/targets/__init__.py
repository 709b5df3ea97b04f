"""Targets: LDAP, Slurm accounting, Kubernetes. Each is one package, `sup/targets/<name>/`, that holds
its settings model, its factory and what it can do, exported as one `TargetSpec` (spec.py); the
registry (registry.py) lists the specs. All speak the protocol of base.py.

A target is enabled when its settings section is present. Its heavy modules are imported only when it
is opened, so a site without Kubernetes never loads the Kubernetes client.

Adding a target `nfs`:
1. `sup/targets/nfs/settings.py`: `class NfsSettings(Section)` (sup/common/sections.py); it becomes the
   settings key `nfs` (env `SUP_NFS__*`, YAML `nfs:`) without any edit in sup/config.
2. `sup/targets/nfs/target.py`: `class NfsTarget` with `name = "nfs"`, `__init__(context)`,
   `observe(scope=None)`, `diff(desired, observed, scope=None)`, `apply(changes)`, `close()`
   (base.Target). Raise ObserveError on a partial read, TargetError(..., terminal=True) for what only
   new input can fix. Take writer locks with `context.lock(name, timeout)`; never open the store.
3. `sup/targets/nfs/spec.py`: `SPEC = TargetSpec(name="nfs", settings_model=NfsSettings, open=...)`,
   the factory importing target.py lazily; `can_scope` / `adopt` if it can.
4. One line in registry.py's SPECS (and, for a typed `settings.nfs`, one in TargetSections).
The plan/reconcile routers, `--target`, /readyz and the statuses pick it up from the registry.
"""
