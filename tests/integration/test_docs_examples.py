"""The client examples the docs include (docs/examples/client/*.py), each run as a script against the
broker under test, as a reader would run it: its service URL from ``PULSAR_SERVICE_URL``, its
working directory holding the ``keys/`` the encryption example reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "client"
SCRIPTS = sorted(path.name for path in EXAMPLES.glob("*.py"))


def write_rsa_pair(folder: Path) -> None:
    """keys/public.pem and keys/private.pem: a fresh 2048-bit RSA pair, as the encryption example expects."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    folder.mkdir()
    (folder / "private.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    (folder / "public.pem").write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def test_every_example_is_included_by_a_page() -> None:
    pages = "".join(page.read_text() for page in (EXAMPLES.parents[1]).glob("*.md"))
    for script in SCRIPTS:
        assert f"examples/client/{script}" in pages, f"no page includes {script}"


@pytest.mark.parametrize("script", SCRIPTS)
def test_example_runs(broker, script: str, tmp_path: Path) -> None:
    write_rsa_pair(tmp_path / "keys")
    env = {**os.environ, "PULSAR_SERVICE_URL": broker.service_url}
    result = subprocess.run(
        [sys.executable, EXAMPLES / script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{script} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
