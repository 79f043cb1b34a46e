"""Where models come from: hub names and local folders as they are, GGUF files converted once to a local folder."""
