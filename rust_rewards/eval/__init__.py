"""Generation from a model and the metrics computed over verified completions."""
