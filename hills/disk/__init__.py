"""The hill on disk: finding and creating it, hill.yaml and its key tables, the
locks, pins, bundles, hillclimb import, uv environments."""
