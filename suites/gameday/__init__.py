"""Game-day drills (destructive, self-restoring); select with ``-m gameday``."""
