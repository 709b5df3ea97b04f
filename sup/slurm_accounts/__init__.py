"""Slurm accounts SUP manages: the tree below root, shares, QOS, limits, and the group whose members
get associations."""
