"""Training: configs, trainers, the run loop, callbacks and recording, dry run, GPU plan, tiny model."""
