"""media-worker: Chunked uploads and ffmpeg transcodes that survive restarts and deploys."""
