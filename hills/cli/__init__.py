"""The command-line front end: the registry of verbs, the fast parser, shared
options, output and the manual."""
