"""signal-watcher: Polls user-defined HTTP probes and triggers an agent run only when the value changes."""
