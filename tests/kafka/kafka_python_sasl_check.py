"""kafka-python over SASL_SSL against a lionet kafka server (tests/kafka/sasl_clients_test.cc runs it).

Usage: kafka_python_sasl_check.py BOOTSTRAP CAFILE MECHANISM USER PASSWORD TOPIC COUNT
A producer with security_protocol=SASL_SSL (the CA file verifies the server's certificate)
sends COUNT records; a consumer with the same settings reads them back. Prints "OK <count>".
With a wrong PASSWORD the producer cannot bootstrap: prints "AUTH-FAILED <error>" instead, after
kafka-python's own log lines (stderr), which name the authentication error the broker sent.
"""
import logging
import sys

from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError

bootstrap, cafile, mech, user, password, topic, count = sys.argv[1:8]
count = int(count)
common = dict(bootstrap_servers=bootstrap, security_protocol="SASL_SSL", ssl_cafile=cafile,
              sasl_mechanism=mech, sasl_plain_username=user, sasl_plain_password=password)

logging.getLogger("kafka.net").addHandler(logging.StreamHandler(sys.stderr))  # the connection errors
logging.getLogger("kafka.net").setLevel(logging.WARNING)
try:
    producer = KafkaProducer(bootstrap_timeout_ms=3000, **common)
except KafkaError as e:
    print("AUTH-FAILED", type(e).__name__, e)
    sys.exit(0)
futures = [producer.send(topic, key=b"k%d" % i, value=b"value-%d" % i) for i in range(count)]
producer.flush(timeout=30)
offsets = [f.get(timeout=30).offset for f in futures]
assert offsets == list(range(offsets[0], offsets[0] + count)), offsets
producer.close(timeout=10)

consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **common)
got = []
for msg in consumer:
    got.append((msg.key, msg.value))
    if len(got) == count:
        break
consumer.close()
assert got == [(b"k%d" % i, b"value-%d" % i) for i in range(count)], (got[:5], len(got))
print("OK", len(got))
