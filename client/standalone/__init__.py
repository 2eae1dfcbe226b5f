"""The embedded standalone broker."""
