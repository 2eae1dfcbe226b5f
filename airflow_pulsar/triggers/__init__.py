"""Triggers of the Pulsar provider (they run in the triggerer, on asyncio)."""
