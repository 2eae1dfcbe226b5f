"""PROTOBUF_NATIVE definitions as Pulsar's registry reads them: the root message a definition names.

A PROTOBUF_NATIVE definition is a JSON object with ``fileDescriptorSet`` (a base64
``FileDescriptorSet`` holding the root message's file and every file it imports),
``rootMessageTypeName`` and ``rootFileDescriptorName``. Pulsar rebuilds the root message's
descriptor from it and refuses a definition it cannot rebuild; its default compatibility check
(``ProtobufNativeSchemaCompatibilityCheck``) then compares only the root message's full name.
"""

from __future__ import annotations

import base64
import binascii
import json

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

__all__ = ["ProtobufNativeSchemaError", "root_message_name"]


class ProtobufNativeSchemaError(ValueError):
    """A PROTOBUF_NATIVE definition the root message descriptor cannot be built from."""


def root_message_name(data: bytes) -> str:
    """The full name of the root message ``data`` declares, once its descriptor is built from the
    definition's files; ProtobufNativeSchemaError saying why it cannot be."""
    try:
        document = json.loads(data)
        if not isinstance(document, dict):
            raise ValueError("the definition is not a JSON object")
        encoded, root_name = document.get("fileDescriptorSet"), document.get("rootMessageTypeName")
        root_file = document.get("rootFileDescriptorName")
        if not (isinstance(encoded, str) and isinstance(root_name, str) and isinstance(root_file, str)):
            raise ValueError("fileDescriptorSet, rootMessageTypeName and rootFileDescriptorName must be strings")
        file_set = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(encoded, validate=True))
        files = {file.name: file for file in file_set.file}
        if root_file not in files:
            raise ValueError(f"no file {root_file!r} in the file descriptor set")
        pool = descriptor_pool.DescriptorPool()
        _add_with_imports(pool, files, root_file, set())
        descriptor = pool.FindMessageTypeByName(root_name)
        if descriptor.file.name != root_file:
            raise ValueError(f"{root_name} is not defined in {root_file}")
        return str(descriptor.full_name)
    except (ValueError, TypeError, KeyError, binascii.Error, DecodeError) as exc:
        raise ProtobufNativeSchemaError(f"deserialize ProtobufNative Schema failed: {exc}") from None


def _add_with_imports(
    pool: descriptor_pool.DescriptorPool, files: dict[str, descriptor_pb2.FileDescriptorProto], name: str, visiting: set[str]
) -> None:
    """Add the file ``name`` to ``pool`` after the files it imports (whatever their order in the set)."""
    if name in visiting:
        raise ValueError(f"cyclic imports through {name}")
    visiting.add(name)
    file = files.get(name)
    if file is None:
        raise ValueError(f"the imported file {name} is not in the file descriptor set")
    for dependency in file.dependency:
        try:
            pool.FindFileByName(dependency)
        except KeyError:
            _add_with_imports(pool, files, dependency, visiting)
    pool.AddSerializedFile(file.SerializeToString())
    visiting.discard(name)
