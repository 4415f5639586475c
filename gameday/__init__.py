"""gameday: failover game days and conformance checks for multi-region federations."""
