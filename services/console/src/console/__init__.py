"""The console: a backend for frontend over the five services\x27 public APIs."""
