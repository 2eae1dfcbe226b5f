"""Producers and consumers while the cluster loses a bookie or ZooKeeper mid-stream, with broker
deduplication on and a producer that names itself and numbers its messages (sequence id = index).

A bookie killed with -9: each entry goes to two of the three bookies, so the brokers replace the
lost one in the ensembles of their open ledgers and go on writing; the bookie is started again
on its port and data once two thirds of the stream are acknowledged. ZooKeeper killed with -9 and
started again on its port and data: writes to open ledgers need no metadata, and the brokers'
sessions survive the restart (ZooKeeper restores them from its data dir).

Either way the topic stores every message once, in send order per key, and the live consumer
sees every one; it sees one again only if it had to reconnect (an ack lost on the way). The
stream sends its middle third with the part down and its last third after the part is back (see
tests/support/keyed_stream.py), so the figures cover writes in both.
"""

from __future__ import annotations

import pytest

from jvm.pulsar_cluster import CLUSTER_NAME, PulsarCluster
from jvm.pulsar_storage import Bookie
from tests.support.cluster_topics import partitioned_topic_on_every_broker
from tests.support.keyed_stream import COUNT, KeyedStream, StreamHistory, Tally, stored_messages, tally

pytestmark = pytest.mark.cluster

PARTITIONS = 2
PRODUCER = "keyed-stream"


def _check(cluster: PulsarCluster, topic: str, history: StreamHistory) -> None:
    """Every message stored once in key order and delivered; redelivered only after a reconnect;
    the producer's last acknowledged sequence id is the stream's last index."""
    counts = tally(history, stored_messages(cluster, topic))
    redelivered = counts.redelivered if history.consumer_reconnects else 0
    assert counts == Tally.exactly_once(COUNT, redelivered)
    assert (history.producer_name, history.last_sequence_id) == (PRODUCER, COUNT - 1)


def _partitions(topic: str) -> list[str]:
    return [f"{topic}-partition-{i}" for i in range(PARTITIONS)]


def test_the_kill_of_a_bookie_mid_stream_keeps_every_message_once(
    cluster: PulsarCluster, dedup_namespace: str, topic_name: str, stream: KeyedStream
) -> None:
    topic, _ = partitioned_topic_on_every_broker(cluster, dedup_namespace, topic_name, PARTITIONS)
    killed: list[Bookie] = []

    def kill_a_bookie_of_every_partition() -> None:
        # Two ensembles of two of the three bookies share one at least: the kill hits both partitions' ledgers.
        writing = [set(ensembles[max(ensembles)]) for ensembles in map(cluster.ensembles, _partitions(topic))]
        victim = cluster.bookie_of(sorted(set.intersection(*writing))[0])
        victim.kill()
        killed.append(victim)

    def restart_it() -> None:
        cluster.start_bookie(cluster.bookies.index(killed[0]))

    history = stream(topic, kill_a_bookie_of_every_partition, restart_it, producer_name=PRODUCER)

    _check(cluster, topic, history)
    (victim,) = killed
    for partition in _partitions(topic):
        ensembles = cluster.ensembles(partition)
        # The ledger went on without the killed bookie: from some entry on, a new ensemble of two live bookies.
        firsts = sorted(ensembles)
        assert len(firsts) > 1, ensembles
        lost, newest = ensembles[firsts[-2]], ensembles[firsts[-1]]
        assert victim.bookie_id in lost and victim.bookie_id not in newest and len(newest) == 2, ensembles
    assert victim.running


def test_a_zookeeper_restart_mid_stream_keeps_every_message_once(
    cluster: PulsarCluster, dedup_namespace: str, topic_name: str, stream: KeyedStream
) -> None:
    topic, owners = partitioned_topic_on_every_broker(cluster, dedup_namespace, topic_name, PARTITIONS)
    before = cluster.zookeeper.ephemeral_nodes()

    history = stream(topic, cluster.zookeeper.kill, cluster.start_zookeeper, producer_name=PRODUCER)

    _check(cluster, topic, history)
    # The brokers kept their sessions, so their registrations and their partitions.
    after = cluster.zookeeper.ephemeral_nodes()
    for broker in cluster.brokers:
        node = f"/loadbalance/brokers/{broker.broker_id}"
        assert after[node] == before[node]
    assert sorted(cluster.admin("GET", f"/admin/v2/brokers/{CLUSTER_NAME}").json()) == sorted(b.broker_id for b in cluster.brokers)
    assert [cluster.lookup(partition) for partition in _partitions(topic)] == [owners[i] for i in range(PARTITIONS)]
