-- Queries on the ingested tables (docs/spark-ingestion.md). tests/integration/test_demo.py runs
-- the Delta ones on the table of the Delta demo, its names in place of shop.orders and /data/orders and one
-- of its batch ids; tests/spark/test_ingest_lakehouse.py the Iceberg one on its table in a catalog lake.

-- [START queries]
SELECT batch_id, count(*) FROM shop.orders GROUP BY batch_id;              -- either format, by name
SELECT * FROM delta.`/data/orders` WHERE batch_id = '5b95edfaf89bef95';     -- a Delta location
SELECT snapshot_id, summary['airflow-pulsar.batch-id'] FROM lake.shop.orders.snapshots;  -- Iceberg
-- [END queries]
