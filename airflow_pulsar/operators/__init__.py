"""Operators of the Pulsar provider."""
