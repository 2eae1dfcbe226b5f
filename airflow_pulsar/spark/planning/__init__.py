"""What runs in the Airflow worker around a Spark job: the exclusive hold on the subscription,
planning and allocating a batch, and the plan log. It never ships to Spark."""
