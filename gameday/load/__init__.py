"""Load: real locust load in subprocesses, read back as request records."""
