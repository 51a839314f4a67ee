"""`python -m hills`: the same entry point as the `hills` executable."""

from .cli import main

main()
