"""The reference federated app: the system under test that the local target runs."""
