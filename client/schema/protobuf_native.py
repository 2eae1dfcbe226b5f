"""ProtobufNativeSchema: generated protobuf messages in their own binary encoding.

The declaration is what the Java and the official Python clients declare: a JSON object with the
message's file and every file it imports as a base64 ``FileDescriptorSet`` (imports before the
files importing them), the message's full name and its file's name. The broker and other
clients rebuild the message type from it. ``descriptor_pb2`` loads with the first such schema.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, TypeVar

from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.message import Message

from .base import Schema
from .info import SchemaType

if TYPE_CHECKING:
    from google.protobuf import descriptor_pb2

__all__ = ["ProtobufNativeSchema"]

M = TypeVar("M", bound=Message)


def _add_file(file: FileDescriptor, added: set[str], file_set: descriptor_pb2.FileDescriptorSet) -> None:
    """Add ``file`` to ``file_set`` after the files it imports, each once."""
    if file.name in added:
        return
    for dependency in file.dependencies:
        _add_file(dependency, added, file_set)
    added.add(file.name)
    file.CopyToProto(file_set.file.add())


def schema_definition(descriptor: Descriptor) -> dict[str, str]:
    """The declared definition of the message type ``descriptor``."""
    from google.protobuf import descriptor_pb2

    file_set = descriptor_pb2.FileDescriptorSet()
    _add_file(descriptor.file, set(), file_set)
    return {
        "fileDescriptorSet": base64.b64encode(file_set.SerializeToString()).decode("ascii"),
        "rootMessageTypeName": descriptor.full_name,
        "rootFileDescriptorName": descriptor.file.name,
    }


class ProtobufNativeSchema(Schema[M]):
    """Instances of the generated message class ``record_cls``."""

    _record_cls: type[M]

    def __init__(self, record_cls: type[M]):
        if not (isinstance(record_cls, type) and issubclass(record_cls, Message)):
            raise TypeError(f"record_cls must be a generated protobuf message class, not {record_cls!r}")
        super().__init__(record_cls, SchemaType.PROTOBUF_NATIVE, schema_definition(record_cls.DESCRIPTOR), "PROTOBUF_NATIVE")

    def encode(self, obj: M) -> bytes:
        self._validate_object_type(obj)
        return obj.SerializeToString()

    def decode(self, data: bytes) -> M:
        return self._record_cls.FromString(data)

    def __str__(self) -> str:
        return f"ProtobufNativeSchema({self._record_cls.__name__})"
