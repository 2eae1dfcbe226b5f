"""The user functions the docs' example DAGs name by dotted path ("my_project.orders.rows"): in the
plugins folder, which every Airflow component, the triggerer too, puts on its import path."""
