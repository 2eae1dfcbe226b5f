"""Pure-Python Apache Pulsar client; never imports airflow."""
