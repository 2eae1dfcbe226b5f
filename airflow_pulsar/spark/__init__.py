"""The PySpark ingestion job and its Python data source; imports ``airflow_pulsar.client``, never ``airflow``."""
