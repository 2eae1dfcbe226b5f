"""The checkout's JVM parts: launchers of Apache Pulsar (standalone and a cluster), the Delta and
Iceberg jar lists, and the class-data-sharing archives, all over the jars ``make`` resolves from
Maven Central into ``.jvm/``. Imported from the checkout (tests, benchmarks, the demo), never
installed."""
