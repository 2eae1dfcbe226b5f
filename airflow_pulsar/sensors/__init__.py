"""Sensors of the Pulsar provider."""
