"""Pulsar wire frames: encoding, and an incremental decoder for a byte stream.

A simple frame is ``[u32 total][u32 command size][BaseCommand]``. A payload frame (SEND, MESSAGE)
adds, after the command, an optional ``[0x0e02][u32 size][BrokerEntryMetadata]`` and then
``[0x0e01][u32 crc32c][u32 metadata size][MessageMetadata][payload]``, where the checksum covers
everything from the metadata size to the end of the frame. We call that covered part the *entry
region*: the broker stores it verbatim and forwards it with the same checksum.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from . import checksum as crc
from .commands import missing_body
from .compression import Buffer
from .message_command import MessageFields, read_message
from .PulsarApi_pb2 import BaseCommand, CommandMessage, CommandSendReceipt, MessageMetadata
from .receipts import ReceiptShapes, SendReceipt
from .wire import MESSAGE_ENVELOPE, RECEIPT_ENVELOPE, signed64

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02

# Pulsar allows a frame this much larger than max_message_size for command and metadata.
FRAME_OVERHEAD = 10 * 1024
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024

_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_HEADER = struct.Struct(">II")
_CHECKSUM_HEADER = struct.Struct(">HI")


class FrameError(ValueError):
    """A frame that cannot be decoded; the connection that sent it cannot be trusted further."""


class FrameTooLargeError(FrameError):
    """A frame whose declared size exceeds the connection's limit."""


class ChecksumError(FrameError):
    """A payload frame whose CRC32C does not match its contents."""


@dataclass(slots=True)
class Frame:
    """One decoded frame.

    ``entry`` is the checksum-covered region ``[u32 metadata size][metadata][payload]`` of a
    payload frame (``None`` for simple frames); ``checksum`` its CRC32C as sent.
    """

    command: BaseCommand
    entry: bytes | None = None
    checksum: int | None = None
    broker_entry_metadata: bytes | None = None


class MessageFrame(NamedTuple):
    """A MESSAGE frame as :meth:`FrameDecoder.feed_messages` reads it: its command's fields, no protobuf objects.

    Ids are signed (see :func:`.wire.signed64`); ``entry`` is the checksum-covered region, as in :class:`Frame`.
    """

    consumer_id: int
    ledger_id: int
    entry_id: int
    redelivery_count: int
    ack_set: tuple[int, ...]
    entry: bytes


# Builds a MessageFrame from a plain tuple without NamedTuple's generated ``__new__`` (a Python
# call per message, on the reader thread).
_new_message_frame = tuple.__new__
# The templates a decoder keeps: one per consumer whose runs of MESSAGEs interleave on the connection
# (a partitioned topic's consumers, say), the newest first.
MAX_TEMPLATES = 8
# Where the body of a MESSAGE (or SEND_RECEIPT) starts in its BaseCommand: after the envelope and a one-byte length.
_MESSAGE_BODY_AT = len(MESSAGE_ENVELOPE) + 1
_TYPE_KEY, _MESSAGE_TYPE, _MESSAGE_KEY = MESSAGE_ENVELOPE
_RECEIPT_TYPE, _RECEIPT_KEY = RECEIPT_ENVELOPE[1:]


class MessageTemplate:
    """A MESSAGE frame's command as bytes around its entry id, cut from a frame read field by field.

    A broker delivers a consumer's entries in runs of MESSAGEs whose commands differ in the entry
    id alone. A command that is the template's bytes around an entry id varint of the same width
    is read by protobuf as the template's fields with that entry id, so :meth:`frame` reads it
    with two byte comparisons and the varint instead of field by field. ``head`` runs from the
    command size through the entry id's key; ``tail`` from after the entry id through the
    payload section's magic (a frame with broker entry metadata never matches).
    """

    __slots__ = ("head", "width", "tail", "fields", "least")

    def __init__(self, head: bytes, width: int, tail: bytes, fields: MessageFields):
        self.head = head
        self.width = width
        self.tail = tail
        self.fields = fields
        self.least = len(head) + width + len(tail) + 8  # the bytes of a frame with a checksum and a metadata size

    def frame(self, buf: bytearray, view: memoryview, start: int, stop: int, verify_checksum: bool) -> MessageFrame | None:
        """The MessageFrame in ``buf[start:stop]`` (from its command size on; its head matched) if
        it matches the rest of the template and its payload section is sound; None means: decode
        it the general way."""
        if stop - start < self.least:
            return None
        at = start + len(self.head)
        entry_id = _fixed_varint(buf, at, self.width)
        tail = self.tail
        if entry_id < 0 or not buf.startswith(tail, at + self.width):
            return None
        at += self.width + len(tail)
        entry = bytes(view[at + 4 : stop])
        if verify_checksum and crc.crc32c(entry) != _U32.unpack_from(buf, at)[0]:
            return None
        if _U32.unpack_from(entry, 0)[0] > len(entry) - 4:
            return None
        consumer_id, ledger_id, _, redelivery_count, _ = self.fields
        return _new_message_frame(MessageFrame, (consumer_id, ledger_id, entry_id, redelivery_count, (), entry))


def _message_template(view: memoryview, start: int, command_end: int, read: tuple[MessageFields, int, int]) -> MessageTemplate | None:
    """The template of the MESSAGE frame whose command size is at ``start``, from its command as
    :func:`.message_command.read_message` read it; None for a frame it cannot stand for."""
    fields, entry_at, entry_end = read
    # Not for an ack_set (a partly acknowledged batch's redelivery, rare) or broker entry metadata.
    if fields[4] or _U16.unpack_from(view, command_end)[0] != MAGIC_CRC32C:
        return None
    return MessageTemplate(bytes(view[start:entry_at]), entry_end - entry_at, bytes(view[entry_end : command_end + 2]), fields)


def _add_template(templates: list[MessageTemplate], template: MessageTemplate) -> None:
    """Put ``template`` first among ``templates`` (in place of one with its head), keeping the newest MAX_TEMPLATES."""
    templates[:] = [template, *(kept for kept in templates if kept.head != template.head)][:MAX_TEMPLATES]


def _fixed_varint(buf: bytearray, at: int, width: int) -> int:
    """The varint of exactly ``width`` bytes at ``buf[at]`` (all within ``buf``); -1 if those bytes are not one."""
    value = shift = 0
    last = at + width - 1
    while at < last:
        byte = buf[at]
        if byte < 0x80:
            return -1
        value |= (byte & 0x7F) << shift
        shift += 7
        at += 1
    byte = buf[at]
    return -1 if byte >= 0x80 else value | byte << shift


def message_frame(message: CommandMessage, entry: bytes) -> MessageFrame:
    """The MessageFrame of a MESSAGE decoded by the generated classes (one the fast path leaves to them)."""
    position = message.message_id
    fields = (message.consumer_id, signed64(position.ledgerId), signed64(position.entryId), message.redelivery_count,
              tuple(message.ack_set), entry)
    return _new_message_frame(MessageFrame, fields)


def encode_command(command: BaseCommand | bytes) -> bytes:
    """Encode a simple (payload-less) frame; ``command`` may be given already serialized."""
    body = command if isinstance(command, bytes) else command.SerializeToString()
    return _HEADER.pack(len(body) + 4, len(body)) + body


def encode_entry(metadata: MessageMetadata | bytes, payload: Buffer) -> bytes:
    """Build the checksum-covered entry region from metadata and (already compressed) payload."""
    meta = metadata if isinstance(metadata, (bytes, bytearray)) else metadata.SerializeToString()
    return _U32.pack(len(meta)) + meta + payload


def encode_payload_command(
    command: BaseCommand | bytes,
    entry: bytes,
    checksum: int | None = None,
    broker_entry_metadata: bytes | None = None,
) -> bytes:
    """Encode a payload frame around an entry region; the checksum is computed when not given.

    ``command`` may be given already serialized (see :func:`.wire.encode_send`).
    """
    if checksum is None:
        checksum = crc.crc32c(entry)
    body = command if isinstance(command, bytes) else command.SerializeToString()
    extra = 0
    bem_part = b""
    if broker_entry_metadata is not None:
        bem_part = _U16.pack(MAGIC_BROKER_ENTRY_METADATA) + _U32.pack(len(broker_entry_metadata)) + broker_entry_metadata
        extra = len(bem_part)
    total = 4 + len(body) + extra + 6 + len(entry)
    return b"".join(
        (_HEADER.pack(total, len(body)), body, bem_part, _CHECKSUM_HEADER.pack(MAGIC_CRC32C, checksum), entry)
    )


def split_entry(entry: bytes | memoryview) -> tuple[MessageMetadata, memoryview]:
    """Parse an entry region into its MessageMetadata and a view of the payload."""
    metadata, payload_at = entry_metadata(entry)
    return metadata, memoryview(entry)[payload_at:]


def entry_metadata(entry: bytes | memoryview) -> tuple[MessageMetadata, int]:
    """The MessageMetadata of an entry region, and where its payload starts."""
    if len(entry) < 4:
        raise FrameError(f"entry of {len(entry)} bytes is too short for a metadata size")
    (meta_size,) = _U32.unpack_from(entry, 0)
    payload_at = 4 + meta_size
    if payload_at > len(entry):
        raise FrameError(f"metadata size {meta_size} runs past the end of a {len(entry)}-byte entry")
    try:
        metadata = MessageMetadata.FromString(entry[4:payload_at])  # type: ignore[arg-type]  # any buffer parses
    except Exception as exc:  # protobuf raises DecodeError, a plain Exception subclass
        raise FrameError(f"malformed MessageMetadata: {exc}") from exc
    return metadata, payload_at


class FrameDecoder:
    """Incremental decoder: feed it bytes as they arrive, get back whole frames.

    It keeps at most one partial frame buffered and rejects a frame larger than
    ``max_frame_size`` as soon as its size prefix arrives, before buffering it.
    """

    __slots__ = ("_buf", "_pos", "_templates", "_receipts", "max_frame_size", "verify_checksum")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_MESSAGE_SIZE + FRAME_OVERHEAD, verify_checksum: bool = True):
        self._buf = bytearray()
        self._pos = 0
        # The last MESSAGEs read field by field, for the next ones of their runs (see MessageTemplate).
        self._templates: list[MessageTemplate] = []
        # The shapes of the last SEND_RECEIPTs read field by field, for the next ones (see ``receipts``).
        self._receipts = ReceiptShapes()
        self.max_frame_size = max_frame_size
        self.verify_checksum = verify_checksum

    def feed(self, data: bytes) -> list[Frame]:
        """Append ``data`` and return every frame it completes, in order."""
        return cast(list[Frame], self._feed(data, False))

    def feed_messages(self, data: bytes) -> list[Frame | MessageFrame | SendReceipt]:
        """As :meth:`feed`, but a MESSAGE frame comes as a :class:`MessageFrame`, read off the bytes
        when its command holds only what brokers write (through the template of an earlier one of
        its consumer's run when it differs from that one in the entry id alone), else decoded by
        the generated classes; and a SEND_RECEIPT as a :class:`.receipts.SendReceipt`, read off
        the bytes when it has the shape of one parsed before, else parsed without the BaseCommand
        around it when that holds nothing else."""
        return self._feed(data, True)

    def _feed(self, data: bytes, messages: bool) -> list[Any]:
        buf = self._buf
        if self._pos and self._pos == len(buf):
            buf.clear()
            self._pos = 0
        buf += data
        frames: list[Any] = []
        pos = self._pos
        end = len(buf)
        if end - pos >= 4:
            append = frames.append
            limit = self.max_frame_size
            verify = self.verify_checksum
            templates = self._templates if messages else []
            receipts = self._receipts if messages else None
            # Frames are decoded off one view of the buffer: no copy of a whole frame on the way.
            with memoryview(buf) as view:
                while end - pos >= 4:
                    (total,) = _U32.unpack_from(view, pos)
                    if total > limit:
                        raise FrameTooLargeError(f"frame of {total} bytes exceeds the limit of {limit} bytes")
                    stop = pos + 4 + total
                    if stop > end:
                        break
                    frame: MessageFrame | SendReceipt | None = None
                    for template in templates:
                        if buf.startswith(template.head, pos + 4):
                            frame = template.frame(buf, view, pos + 4, stop, verify)
                            break
                    if frame is None and receipts is not None:
                        frame = receipts.read(view, pos + 4, stop)
                    if frame is None:
                        frame = _decode(view, pos + 4, stop, verify, messages, templates, receipts)
                    append(frame)
                    pos = stop
        # Compact once the consumed prefix dominates, so memory stays bounded by one frame.
        if pos > 65536 and pos * 2 > end:
            del buf[:pos]
            pos = 0
        self._pos = pos
        return frames

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet form a whole frame."""
        return len(self._buf) - self._pos


def decode_frame(frame: bytes, verify_checksum: bool = True) -> Frame:
    """Decode one frame given without its leading total-size field."""
    with memoryview(frame) as view:
        return _decode(view, 0, len(frame), verify_checksum)


def _decode(
    view: memoryview, start: int, stop: int, verify_checksum: bool, messages: bool = False,
    templates: list[MessageTemplate] | None = None, receipts: ReceiptShapes | None = None,
) -> Any:
    """Decode the frame in ``view[start:stop]`` (without its total-size field): a Frame, or with
    ``messages`` a MessageFrame for a MESSAGE and a SendReceipt for a SEND_RECEIPT. A MESSAGE read
    off its bytes adds its template to ``templates``, a receipt parsed alone its shape to
    ``receipts``, if given."""
    size = stop - start
    if size < 4:
        raise FrameError(f"frame of {size} bytes has no command size")
    (cmd_size,) = _U32.unpack_from(view, start)
    if cmd_size > size - 4:
        raise FrameError(f"command size {cmd_size} exceeds the frame's {size - 4} remaining bytes")
    pos = start + 4 + cmd_size
    if (
        messages and cmd_size > _MESSAGE_BODY_AT and pos < stop
        and view[start + 4] == _TYPE_KEY and view[start + 5] == _MESSAGE_TYPE and view[start + 6] == _MESSAGE_KEY
    ):
        # The body's length is one byte, and the body runs to the command's end: nothing else in the BaseCommand.
        body = start + 4 + _MESSAGE_BODY_AT
        read = read_message(view, body, pos) if view[body - 1] == pos - body else None
        if read is not None:
            frame = _new_message_frame(MessageFrame, (*read[0], _entry(view, pos, stop, verify_checksum)[0]))
            if templates is not None:
                template = _message_template(view, start, pos, read)
                if template is not None:
                    _add_template(templates, template)
            return frame
    if (
        messages and pos == stop and cmd_size > _MESSAGE_BODY_AT
        and view[start + 4] == _TYPE_KEY and view[start + 5] == _RECEIPT_TYPE and view[start + 6] == _RECEIPT_KEY
        and view[start + 3 + _MESSAGE_BODY_AT] == cmd_size - _MESSAGE_BODY_AT
    ):
        # The receipt is all the BaseCommand holds: parsed alone, it costs half of parsing both.
        receipt = CommandSendReceipt()
        try:
            receipt.ParseFromString(view[start + 4 + _MESSAGE_BODY_AT : pos])  # type: ignore[arg-type]  # any buffer parses
        except Exception:  # protobuf's DecodeError: the generic path below says what is wrong
            pass
        else:
            if receipt.IsInitialized():
                if receipts is not None:
                    receipts.learn(bytes(view[start:stop]), receipt)
                return SendReceipt.of(receipt)
    command = BaseCommand()
    try:
        command.ParseFromString(view[start + 4 : pos])  # type: ignore[arg-type]  # any buffer parses; the message keeps no reference
    except Exception as exc:  # protobuf's DecodeError
        raise FrameError(f"malformed BaseCommand: {exc}") from exc
    if not command.IsInitialized():  # an initialized command has its type: a required field
        if not command.HasField("type"):
            raise FrameError("BaseCommand without a known type")
        missing = ", ".join(command.FindInitializationErrors())  # type: ignore[attr-defined]  # in protobuf, not in its stubs
        raise FrameError(f"{BaseCommand.Type.Name(command.type)} is missing required fields: {missing}")
    absent = missing_body(command)
    if absent is not None:
        raise FrameError(f"{BaseCommand.Type.Name(command.type)} without its {absent}")
    if messages and command.type == BaseCommand.MESSAGE:
        if pos == stop:
            raise FrameError("MESSAGE without a payload")
        return message_frame(command.message, _entry(view, pos, stop, verify_checksum)[0])
    if messages and command.type == BaseCommand.SEND_RECEIPT:
        if pos != stop:  # no broker sends one with a payload, but a payload sent must be sound
            _entry(view, pos, stop, verify_checksum)
        return SendReceipt.of(command.send_receipt)
    if pos == stop:
        return Frame(command)
    entry, checksum, broker_entry_metadata = _entry(view, pos, stop, verify_checksum)
    return Frame(command, entry, checksum, broker_entry_metadata)


def _entry(view: memoryview, pos: int, stop: int, verify_checksum: bool) -> tuple[bytes, int, bytes | None]:
    """(entry, checksum, broker entry metadata) of the payload section in ``view[pos:stop]``."""
    broker_entry_metadata = None
    if stop - pos >= 6 and _U16.unpack_from(view, pos)[0] == MAGIC_BROKER_ENTRY_METADATA:
        (bem_size,) = _U32.unpack_from(view, pos + 2)
        if bem_size > stop - pos - 6:
            raise FrameError(f"broker entry metadata size {bem_size} runs past the end of the frame")
        broker_entry_metadata = bytes(view[pos + 6 : pos + 6 + bem_size])
        pos += 6 + bem_size
    if stop - pos < 10:
        raise FrameError(f"payload section of {stop - pos} bytes is too short")
    magic, checksum = _CHECKSUM_HEADER.unpack_from(view, pos)
    if magic != MAGIC_CRC32C:
        raise FrameError(f"unexpected magic 0x{magic:04x} where 0x0e01 was expected")
    entry = bytes(view[pos + 6 : stop])
    if verify_checksum:
        actual = crc.crc32c(entry)
        if actual != checksum:
            raise ChecksumError(f"checksum mismatch: frame says 0x{checksum:08x}, contents give 0x{actual:08x}")
    (meta_size,) = _U32.unpack_from(entry, 0)
    if meta_size > len(entry) - 4:
        raise FrameError(f"metadata size {meta_size} runs past the end of the frame")
    return entry, checksum, broker_entry_metadata
