"""The running half of a pipeline: sections and their rounds against a Backend, the
context budget, continuation, events, the run directory and its manifest."""
