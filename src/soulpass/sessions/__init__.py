"""Sandboxes and their session buffers: everything a conversation writes before archive."""
