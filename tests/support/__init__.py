"""What the test tiers share: one module per concept, imported as ``tests.support.<module>``.

The checkout's root is on the import path (pytest's ``pythonpath``), so no test edits ``sys.path``.
Brokers and clients in their own processes, Airflow's components and settings, Spark clusters and
tables, fault injection, and the checks the tiers assert with.
"""
