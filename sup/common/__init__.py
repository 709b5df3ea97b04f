"""Pieces shared by the resource packages (users, groups, Slurm accounts, tokens, audit)."""
