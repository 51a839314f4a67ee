"""The base layer: errors, git, machine state, digests, records; imports no
other layer."""
