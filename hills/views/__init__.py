"""Read-only views of a hill and its reports: attempts, ranks, one report, the
journal, status and log."""
