"""Cluster plumbing: one local GPU per job (``gpu_lease``); SLURM itself is handled by the workflow profile."""
