"""The commit of a parquet, orc, json or csv batch on a local file system (the rest runs in the
ingest tests): a staging directory is renamed to the batch's partition directory only where none
is, so a later attempt, or a zombie, leaves a committed batch as it is."""

from __future__ import annotations

from pathlib import Path

from airflow_pulsar.spark.job.file_tables import FileTable, LocalFiles


def staged(directory: Path, *names: str) -> Path:
    directory.mkdir(parents=True)
    for name in names:
        (directory / name).write_text(name)
    return directory


def test_a_batch_directory_is_renamed_into_place_only_where_none_is(tmp_path: Path) -> None:
    table = FileTable(tmp_path.as_uri(), {})
    files = LocalFiles()
    first = staged(tmp_path / "_ingest_staging" / "b1-attempt-1", "part-0.parquet")
    second = staged(tmp_path / "_ingest_staging" / "b1-attempt-2", "part-1.parquet")
    assert table.staging("b1", 2) == second.as_uri()

    assert files.rename_if_absent(table.staging("b1", 2), table.partition("b1"))
    assert not files.rename_if_absent(table.staging("b1", 1), table.partition("b1"))

    assert sorted(path.name for path in (tmp_path / "batch_id=b1").iterdir()) == ["part-1.parquet"]
    assert files.exists(table.partition("b1")) and first.exists() and not second.exists()
    assert files.names((tmp_path / "_ingest_staging").as_uri()) == ["b1-attempt-1"]
    files.remove(first.as_uri())
    assert files.names((tmp_path / "_ingest_staging").as_uri()) == []
