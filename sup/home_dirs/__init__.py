"""The home directory maker (`sup homes serve`, `sup homes sync --once`; docs/homes.md): with
`kube.home_mode: shared`, each person's directory on the shared home filesystem, made by a small
privileged process apart from SUP.

wanted.py  the login ConfigMaps' passwd files -> the homes to have, and what is refused (pure)
plan.py    wanted homes + what each path holds -> keep, make, fix, move, refuse (pure)
disk.py    the syscalls: observe and act, walking from the mount's descriptor, never following
quota.py   XFS project quotas (project id = uid)
source.py  list + watch of the login ConfigMaps through SUP's Kubernetes client
service.py a pass (sync) and the serve loop; metrics.py its Prometheus metrics
"""
