"""Airflow assets of Pulsar topics: the ``pulsar`` asset URI scheme (see :mod:`.pulsar`)."""
