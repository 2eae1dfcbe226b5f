# Reading the table of `make demo FORMAT=delta` back with Spark SQL (docs/spark-ingestion.md), from
# the checkout. tests/integration/test_demo.py runs the Delta demo and then this script where the
# demo ran, and the queries of queries.sql with the same command.

# [START read demo table]
SPARK_HOME=$(.venv/bin/python -c 'import pyspark, os; print(os.path.dirname(pyspark.__file__))') \
.venv/bin/spark-sql --jars "$(cat .jvm/lakehouse-delta.jars)" \
  --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \
  --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog \
  --conf spark.sql.warehouse.dir=$PWD/var/demo/warehouse \
  --conf "spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName=$PWD/var/demo/metastore/metastore_db" \
  --conf "spark.driver.extraJavaOptions=-Dderby.system.home=$PWD/var/demo/metastore" \
  -e "SELECT partition, count(*) FROM shop.events GROUP BY partition"
# [END read demo table]
