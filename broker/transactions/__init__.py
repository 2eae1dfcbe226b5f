"""Transactions (PIP-31) in the standalone broker: the coordinators and their log, each topic's
transaction buffer, each subscription's pending acknowledgements, and the commands that serve them."""
