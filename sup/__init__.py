"""SUP: user provisioning for Slurm-on-Kubernetes clusters."""

__version__ = "0.1.0"
