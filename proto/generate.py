"""Regenerate client/protocol/PulsarApi_pb2.py from proto/PulsarApi.proto.

Usage::

    python proto/generate.py           # write the module
    python proto/generate.py --check   # exit 1 if the committed module is stale

protoc comes from the pinned ``grpcio-tools`` dev dependency, so every
developer and CI run produces the same bytes; the committed module is what
users import, so installs need neither protoc nor grpcio-tools.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
PROTO_FILE = PROTO_DIR / "PulsarApi.proto"
TARGET = PROTO_DIR.parent / "client" / "protocol" / "PulsarApi_pb2.py"


def generate() -> bytes:
    """Run protoc on PulsarApi.proto and return the generated Python module."""
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as out_dir:
        # The proto is given relative to its own folder so the descriptor
        # records the stable name "PulsarApi.proto", not a machine path.
        status = protoc.main(
            ["protoc", f"--proto_path={PROTO_DIR}", f"--python_out={out_dir}", str(PROTO_FILE)]
        )
        if status != 0:
            raise RuntimeError(f"protoc failed with status {status}")
        return (Path(out_dir) / "PulsarApi_pb2.py").read_bytes()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="fail if the committed module differs from a fresh build"
    )
    args = parser.parse_args(argv)

    fresh = generate()
    if args.check:
        if not TARGET.exists() or TARGET.read_bytes() != fresh:
            print(f"{TARGET} is stale; run: python proto/generate.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_bytes(fresh)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
