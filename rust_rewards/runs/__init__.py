"""Run folders: their layout and reading what a run wrote."""
