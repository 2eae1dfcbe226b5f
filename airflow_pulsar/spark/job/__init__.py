"""What ships to the Spark driver and executors: the job, its Python data source, the row columns,
the job's spec and the plan it carries. Imports ``airflow_pulsar.client``, never ``airflow``, and
nothing of :mod:`airflow_pulsar.spark.planning`."""
