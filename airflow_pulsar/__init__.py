"""Apache Airflow provider for Apache Pulsar."""
