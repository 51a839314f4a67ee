"""`python -m hills`: the same entry point as the `hills` executable."""

from .entry import main

main()
