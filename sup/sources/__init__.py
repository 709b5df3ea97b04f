"""Sources that write into the store in bulk: file import and export (CSV, YAML, JSON), and adoption
of what an existing cluster already holds (LDAP, Slurm accounting)."""
