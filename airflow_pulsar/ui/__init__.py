"""The Pulsar page of the Airflow UI: a FastAPI app the api-server mounts (``/pulsar``) and a nav
entry that shows it, registered as an Airflow plugin through the ``airflow.plugins`` entry point.

The page shows, for each ``pulsar`` connection the user may read, the topics and subscriptions
with their backlogs, the dead-letter topics, the backlog history that sensors and triggers
recorded (:mod:`.history`) and the ingest batches of the plan logs (:mod:`.batches`).
"""
