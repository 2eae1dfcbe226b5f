"""The dependency check's own version comparison gives ``packaging``'s verdicts (the reference
implementation of PEP 440) on every range the package declares and on generated versions and
ranges of every operator it reads."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version as ReferenceVersion

from airflow_pulsar.client.dependencies import declared_requirements
from airflow_pulsar.client.version_ranges import Version, VersionRange

# Versions around the bounds the package declares, in every spelling PEP 440 orders specially.
EDGE_VERSIONS = [
    "0", "1", "1.0", "1.0.0", "1.0.post1", "1.0a1", "1.0b2", "1.0rc1", "1.0.dev0", "1.0a1.dev2", "1.0.post1.dev1",
    "1.0+local.7", "1!0.5", "2.4", "2.10.9", "2.11", "2.11.0rc1", "2.11.0", "2.11.1", "3.0.0", "3.0.0.dev1",
    "3.3.0", "3.4.0b2", "3.4", "3.5.1", "4.0.0", "4.4.0rc1", "4.25.3", "5.29.0", "5.29.1", "5.29.1.post2",
    "7.99", "8.0.0rc1", "8", "22.0", "42.0.8", "46.0.1", "1.9.2", "1.9.1", "0.27.0", "0.99", "1.0.0a0",
]
RANGES = ["==1.0", "!=1.0", "==1.*", "!=1.0.*", "~=1.0", "~=2.11.0", ">1.0", ">1.0.post1", ">1.0rc1", "<1.0", "<1.0rc1", "<=1.0", ">=1.0a1"]


def agrees(version: str, specifiers: str) -> bool:
    ours = Version.parse(version) in VersionRange(specifiers)
    theirs = SpecifierSet(specifiers).contains(ReferenceVersion(version), prereleases=True)
    return ours == theirs


def test_every_declared_range_gives_the_reference_verdicts() -> None:
    declared = [requirement.versions.text for requirement in declared_requirements()]
    assert "<8,>=5.29.1" in declared, "the installed metadata holds the package's ranges"
    disagree = [(v, r) for r in declared + RANGES for v in EDGE_VERSIONS if not agrees(v, r)]
    assert disagree == []


def test_versions_order_as_pep_440_orders_them() -> None:
    ordered = sorted(EDGE_VERSIONS, key=lambda text: Version.parse(text).key)
    assert [ReferenceVersion(v) for v in ordered] == sorted(ReferenceVersion(v) for v in EDGE_VERSIONS)


releases = st.lists(st.integers(0, 3), min_size=1, max_size=4).map(lambda parts: ".".join(map(str, parts)))
suffixes = st.tuples(
    st.sampled_from(["", "a1", "b0", "rc2", "c1", "alpha3", "preview1"]),
    st.sampled_from(["", ".post1", ".post0", "-2", "r3"]),
    st.sampled_from(["", ".dev0", ".dev4"]),
    st.sampled_from(["", "+local", "+ubuntu.1"]),
)
versions = st.builds(lambda epoch, release, parts: epoch + release + "".join(parts), st.sampled_from(["", "1!"]), releases, suffixes)
public_versions = st.builds(lambda release, parts: release + "".join(parts[:3]), releases, suffixes)
clauses = st.one_of(
    st.builds(lambda op, v: op + v, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), public_versions),
    st.builds(lambda op, v: f"{op}{v}.*", st.sampled_from(["==", "!="]), releases),
    st.builds(lambda v: f"~={v}.0", releases),
)


@settings(max_examples=1000, deadline=None)
@given(versions, st.lists(clauses, min_size=1, max_size=3))
def test_generated_versions_and_ranges_give_the_reference_verdicts(version: str, parts: list[str]) -> None:
    assert agrees(version, ",".join(parts))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("===1.0", "not a version specifier"),
        (">=1.0.*", r"only valid after == or !="),
        ("==1.0rc1.*", "a release only"),
        ("==1.0+local", "local version label"),
        ("~=1", "two parts or more"),
        (">=one", "not a PEP 440 version"),
    ],
)
def test_forms_it_does_not_read_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        VersionRange(text)
