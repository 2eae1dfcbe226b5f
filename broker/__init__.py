"""The embedded standalone broker."""

from airflow_pulsar.client.dependencies import check

# What the broker imports beyond the client's own dependencies (checked when the client is
# imported): its admin HTTP server and its tokens. A version outside the declared range fails
# here, by name, before a broker module imports it.
BROKER_DEPENDENCIES = ("aiohttp", "pyjwt")
check(BROKER_DEPENDENCIES)
