"""Evidence: canonical JSON and signatures, the trusted keys, the chained
attempts logs, the report envelope and its check."""
