"""kafka-python's group consumer against a lionet kafka server (tests/kafka/clients_test.cc runs it).

Usage: kafka_python_group_check.py BOOTSTRAP TOPIC COUNT FIRST
Produces COUNT keyed records (the topic exists, with several partitions). A consumer in group
"pyg" (enable_auto_commit=False) reads FIRST records, commit()s what it consumed and closes; a
new consumer in the group reads the rest. Every record must come exactly once, and the second
consumer must start each partition where the first one's commit left it. Prints
"OK <first> <rest>" or raises.
"""
import sys

from kafka import KafkaConsumer, KafkaProducer

bootstrap, topic, count, first = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

producer = KafkaProducer(bootstrap_servers=bootstrap)
for i in range(count):
    producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
producer.flush(timeout=30)
producer.close(timeout=10)


def consumer():
    return KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id="pyg", auto_offset_reset="earliest",
                         enable_auto_commit=False, consumer_timeout_ms=15000)


c1 = consumer()
got1 = []
for msg in c1:
    got1.append((msg.partition, msg.offset, msg.value))
    if len(got1) == first:
        break
c1.commit()  # the positions: just after each partition's last consumed record
c1.close(autocommit=False)
assert len(got1) == first, len(got1)

c2 = consumer()
got2 = []
for msg in c2:
    got2.append((msg.partition, msg.offset, msg.value))
    if len(got1) + len(got2) == count:
        break
c2.close(autocommit=False)

keys = [(p, o) for p, o, _ in got1 + got2]
assert len(keys) == len(set(keys)), "a record consumed twice"
assert sorted(v for _, _, v in got1 + got2) == sorted(b"v%d" % i for i in range(count)), (len(got1), len(got2))
for p in set(p for p, _, _ in got2):
    before = [o for q, o, _ in got1 if q == p]
    after = [o for q, o, _ in got2 if q == p]
    assert min(after) == (max(before) + 1 if before else 0), (p, before[-3:], after[:3])
print("OK", len(got1), len(got2))
