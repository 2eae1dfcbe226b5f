"""The ingestion example's table format, chosen by $AIRFLOW_PULSAR_EXAMPLES_TABLE_FORMAT (what
``make demo FORMAT=...`` sets), and the DAG file built with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_pulsar.examples.shop_events import TABLE_FORMAT_ENV, example_table_format
from tests.support.dag_files import load_dag_file

INGEST_DAG = Path(__file__).resolve().parents[2] / "dags" / "pulsar_shop_events_ingest.py"


def test_parquet_unless_the_variable_names_a_lakehouse_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TABLE_FORMAT_ENV, raising=False)
    assert example_table_format() == "parquet"
    monkeypatch.setenv(TABLE_FORMAT_ENV, "iceberg")
    assert example_table_format() == "iceberg"


def test_another_value_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TABLE_FORMAT_ENV, "orc")
    with pytest.raises(ValueError, match=f"{TABLE_FORMAT_ENV}='orc'.*parquet, delta, iceberg"):
        example_table_format()


def test_the_ingest_dag_writes_the_chosen_format_with_the_jars_of_the_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TABLE_FORMAT_ENV, "delta")
    module = load_dag_file(INGEST_DAG, "pulsar_shop_events_ingest_delta")

    ingest = module.dag.get_task("ingest_events")
    assert ingest.table_format == "delta"
    assert ingest.jars == "{{ dag_run.conf.get('jars') }}" and "jars" in ingest.template_fields
