"""Schemas (docs/client.md): an Avro record, then the other schema types."""

import os

import airflow_pulsar.client as pulsar

client = pulsar.Client(os.environ.get("PULSAR_SERVICE_URL", "pulsar://127.0.0.1:6650"))

# [START avro]
from airflow_pulsar.client.schema import AvroSchema, Integer, Record, String


class Order(Record):
    order_id = String(required=True)
    quantity = Integer()

producer = client.create_producer("orders", schema=AvroSchema(Order))
consumer = client.subscribe("orders", "billing", schema=AvroSchema(Order))
producer.send(Order(order_id="o-1", quantity=2))
order = consumer.receive().value()       # an Order
# [END avro]
assert isinstance(order, Order) and order.order_id == "o-1", order

# [START other_schemas]
from google.protobuf import timestamp_pb2

from airflow_pulsar.client.schema import (
    BytesSchema,
    JsonSchema,
    KeyValueEncodingType,
    KeyValueSchema,
    ProtobufNativeSchema,
    StringSchema,
)

client.create_producer("raw", schema=BytesSchema()).send(b"\x00\x01")              # the default
client.create_producer("notes", schema=StringSchema()).send("hello")                # UTF-8
client.create_producer("orders-json", schema=JsonSchema(Order)).send(Order(order_id="o-2"))
kv = KeyValueSchema(StringSchema(), JsonSchema(Order), KeyValueEncodingType.SEPARATED)
client.create_producer("orders-by-customer", schema=kv).send(("c-7", Order(order_id="o-3")))
client.create_producer("ticks", schema=ProtobufNativeSchema(timestamp_pb2.Timestamp)).send(
    timestamp_pb2.Timestamp(seconds=1700000000))
# [END other_schemas]
client.close()
print("schemas sent")
