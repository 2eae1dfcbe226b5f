"""Pulsar binary protocol: frames, commands, checksums, batches, compression, message ids."""
