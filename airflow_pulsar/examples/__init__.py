"""What the example DAGs in ``dags/`` call: installed with the provider, so every Airflow
component imports it, the triggerer included (which does not import from the DAGs folder)."""
