"""Targets: LDAP, Slurm accounting, Kubernetes. Each is one package, `sup/targets/<name>/`, that holds
its settings model, its factory and what it can do, exported as one `TargetSpec` (spec.py); the
registry (registry.py) lists the specs. All speak the protocol of base.py.

A target is enabled when its settings section is present. Its heavy modules are imported only when it
is opened, so a site without Kubernetes never loads the Kubernetes client.
"""
