"""kafka-python against a lionet kafka server (tests/kafka/clients_test.cc runs it).

Usage: kafka_python_check.py BOOTSTRAP TOPIC COUNT
A producer with kafka-python's default settings (idempotence on: InitProducerId, sequence
numbers) sends COUNT keyed records with a header; a consumer subscribed to the topic with its
default settings (no group_id; kafka_python_group_check.py covers groups) reads them back from the
beginning. Prints
"OK <count>" or raises.
"""
import sys

from kafka import KafkaConsumer, KafkaProducer

bootstrap, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])

producer = KafkaProducer(bootstrap_servers=bootstrap)
futures = [producer.send(topic, key=b"k%d" % i, value=b"value-%d" % i, headers=[("h", b"%d" % i)])
           for i in range(count)]
producer.flush(timeout=30)
offsets = [f.get(timeout=30).offset for f in futures]
assert offsets == list(range(offsets[0], offsets[0] + count)), offsets
producer.close(timeout=10)

# Defaults but where to start (the default is the end) and when to give up; group_id is None by
# default, so the subscription is served without a group coordinator.
consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10000)
got = []
for msg in consumer:
    got.append((msg.key, msg.value, list(msg.headers)))
    if len(got) == count:
        break
consumer.close()
want = [(b"k%d" % i, b"value-%d" % i, [("h", b"%d" % i)]) for i in range(count)]
assert got == want, (got[:5], len(got))
print("OK", len(got))
