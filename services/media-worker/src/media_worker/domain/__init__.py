"""Pure domain of media-worker: limits, chunk layouts, material states, drain verdicts. No I/O."""
