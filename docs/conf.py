"""Sphinx configuration of the airflow-pulsar documentation (`make docs`)."""

from __future__ import annotations

import importlib.metadata
import os

project = "airflow-pulsar"
author = "The airflow-pulsar authors"
# The version lives in pyproject.toml alone; the installed distribution's metadata carries it.
release = importlib.metadata.version("airflow-pulsar")
version = release
copyright = "the airflow-pulsar authors, Apache License 2.0"

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.graphviz",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "examples/**/README*"]
root_doc = "index"

# Markdown pages: headings get anchors down to level 4, so `page.md#heading` links resolve.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

# Every reference must resolve, except to names of other projects (no intersphinx: the build
# reads nothing from the network).
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(airflow|pendulum|httpx|aiohttp|pyspark|pyarrow|google|sqlalchemy|jwt|cryptography)(\..*)?"),
    (r"py:.*", r"(typing|collections|concurrent|datetime|asyncio|logging|ssl|socket|re|enum|pathlib|os|io|threading|types|abc)\..*"),
    (r"py:.*", r"(Any|Callable|Iterable|Iterator|Mapping|Sequence|Awaitable|AsyncIterator|Coroutine|Literal|Self|TypeVar|T|NoneType)"),
    (r"py:.*", r"(Context|BaseOperator|BaseSensorOperator|BaseTrigger|BaseEventTrigger|BaseHook|TriggerEvent|Asset|Connection)"),
    (r"py:.*", r"(datetime|timedelta|Path|Pattern|Logger|Future|Enum|IntEnum|SSLContext|DateTime|Dataset|OperatorLineage)"),
    (r"py:.*", r"urllib\..*"),
    # Type variables of generic classes.
    (r"py:.*", r"(.*\.)?[A-Z]"),
    # The generated protobuf module: the wire schema, not part of the API.
    (r"py:.*", r"(.*\.)?PulsarApi_pb2\..*|MessageMetadata|SingleMessageMetadata|MessageIdData"),
]

# Internal types that appear in the signatures of documented classes (their base classes, the
# arguments of methods the client's own parts call) but are not part of the reference.
INTERNAL_TYPES = [
    "airflow_pulsar.templated_arguments.TemplatedArguments",
    "airflow_pulsar.message_source.MessageSourceSettings",
    "airflow_pulsar.triggers.resources.ClosesOnCleanup",
    "airflow_pulsar.triggers.backlog_condition.BacklogCondition",
    "airflow_pulsar.operators.subscriptions._SubscriptionOperator",
    "airflow_pulsar.hooks.authentication.ConnectionAuthentication",
    "airflow_pulsar.spark.planning.hold.SubscriptionHold",
    "airflow_pulsar.client.connection.Connection",
    "airflow_pulsar.client.services.TrackedHandler",
    "ClientServices",
    "airflow_pulsar.client.service_info.ServiceInfo",
    "airflow_pulsar.client.admin.base.AdminBase",
    "airflow_pulsar.client.factories.ClientFactories",
    "airflow_pulsar.client.consumer.unpacker.ReceivedEntry",
    "airflow_pulsar.client.consumer.stats.ConsumerStats",
    "airflow_pulsar.client.consumer.settings.ConsumerSettings",
    "ConsumerSettings",
    "airflow_pulsar.client.consumer.receiver_queue.ReceiverQueue",
    "airflow_pulsar.client.consumer.partition_consumer.PartitionConsumer",
    "airflow_pulsar.client.consumer.message.MessageFields",
    "airflow_pulsar.client.protocol.message_id.MessagePosition",
    "airflow_pulsar.client.schema.fields.FieldOptions",
    "FieldType",
    "Delivery",
    "DeliveryCallback",
    "SyncConsumer",
    "SyncProducer",
    "SyncReader",
    "SyncTransaction",
    "AsyncConsumer",
    "AsyncProducer",
    "CoordinatorClient",
    "Timer",
    "airflow_pulsar.client.transaction.transaction.CumulativeAcker",
    "airflow_pulsar.spark.job.plan.IngestPlan",
    "airflow_pulsar.spark.job.plan.BatchOutcome",
]
nitpick_ignore = [(role, name) for name in INTERNAL_TYPES for role in ("py:class", "py:obj")]

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
# The embedded broker and Spark are not imported when the reference is built.
autodoc_mock_imports: list[str] = []

graphviz_output_format = "svg"

html_theme = "furo"
html_title = f"airflow-pulsar {release}"
html_static_path: list[str] = []
html_show_sourcelink = False

# Where the examples are: the docs' own (docs/examples) and the checkout's DAGs (dags/).
DOCS = os.path.dirname(os.path.abspath(__file__))


def resolve_short_name(app, env, node, contnode):
    """Resolve an unqualified Python reference (``ConsumerType``, ``PulsarBacklogTrigger``) to the one
    documented object of that name, as a reader would; ambiguous or unknown names stay unresolved."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].rsplit(".", 1)[-1] if "." not in node["reftarget"].lstrip(".") else node["reftarget"]
    domain = env.get_domain("py")
    suffix = "." + target.rsplit(".", 1)[-1]
    candidates = [
        name for name, entry in domain.objects.items() if (name.endswith(suffix) or name == target) and not entry.aliased
    ]
    if "." in target.lstrip("."):
        candidates = [name for name in candidates if name.endswith("." + target.lstrip("."))]
    if len(candidates) != 1:
        return None
    found = domain.objects[candidates[0]]
    from sphinx.util.nodes import make_refnode

    return make_refnode(app.builder, node["refdoc"], found.docname, found.node_id, contnode, candidates[0])


def setup(app):
    app.connect("missing-reference", resolve_short_name)
