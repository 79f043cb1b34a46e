"""Notebook helpers: forms, paths, progress bars, the script-or-form cell."""
