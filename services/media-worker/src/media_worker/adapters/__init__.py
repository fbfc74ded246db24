"""Adapters of media-worker: storage, PostgreSQL repositories, ffmpeg."""
