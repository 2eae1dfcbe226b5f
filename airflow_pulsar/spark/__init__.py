"""Spark ingestion: :mod:`.planning` runs in the Airflow worker, :mod:`.job` ships to Spark in the
job archive (:mod:`.archive`)."""
