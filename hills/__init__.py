"""hills: frozen, git-native evaluation tasks with signed reports."""

__version__ = "0.1.0"
