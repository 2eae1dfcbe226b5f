"""Pulsar binary protocol: frames, commands, checksums, batches and their columnar reader, compression, message ids."""
