"""The file source: `sup import` and `sup export`. A document (CSV, YAML, JSON; document.py), or one
adopted from what LDAP and Slurm accounting already hold (adopt.py), is checked against the store as
it is now into a plan (plan.py, with current.py's read of the store), guarded against mass removals
(guard.py) and written in batches through the users and groups services (apply.py); export.py writes
the store back out in the shape an import reads."""
