"""Airflow hooks for Apache Pulsar."""
