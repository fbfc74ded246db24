"""Use cases of media-worker: uploads, transcodes, drain."""
