#!/usr/bin/env python3
"""Storage appender and checker for scripts/soak.sh (the lionet binary's storage API over HTTP).

  soak_storage.py append PORT TOPIC SECONDS ACKED_FILE   appends records over one keep-alive
      connection until SECONDS pass (bounded: at most 10 million requests); every record the
      server acknowledged (201 with its offset) is written to ACKED_FILE as "offset<TAB>value".
      A non-201 answer or a broken connection counts as an error. Last line:
      RESULT appended=N errors=E
  soak_storage.py verify PORT TOPIC ACKED_FILE   reads the partition back from offset 0 and
      checks that every acknowledged offset holds its value. Last line:
      RESULT acked=N found=F missing=M wrong=W errors=E
Exit status 1 when errors, missing or wrong records are not zero. 127.0.0.1 only.
"""
import http.client
import json
import sys
import time


def append(port, topic, seconds, acked_path):
    deadline = time.monotonic() + seconds
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    path = f"/topics/{topic}/partitions/0/records"
    appended = errors = 0
    with open(acked_path, "w") as acked:
        i = 0
        while time.monotonic() < deadline and i < 10_000_000:
            value = f"soak-{i}-{time.time_ns()}"
            i += 1
            try:
                conn.request("POST", path, body=value, headers={"Content-Type": "text/plain"})
                r = conn.getresponse()
                body = r.read()
                if r.status != 201:
                    errors += 1
                    print(f"soak_storage: POST answered {r.status}: {body[:200]!r}", file=sys.stderr)
                    continue
                offset = json.loads(body)["base_offset"]
                acked.write(f"{offset}\t{value}\n")
                appended += 1
            except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
                errors += 1
                print(f"soak_storage: POST failed: {e}", file=sys.stderr)
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                time.sleep(0.1)
    print(f"RESULT appended={appended} errors={errors}")
    return 0 if errors == 0 else 1


def verify(port, topic, acked_path):
    acked = {}
    with open(acked_path) as f:
        for line in f:
            off, value = line.rstrip("\n").split("\t", 1)
            acked[int(off)] = value
    stored = {}
    errors = 0
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    offset = 0
    for _ in range(1_000_000):  # bounded paging
        conn.request("GET", f"/topics/{topic}/partitions/0/records?offset={offset}&max_bytes=1048576")
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            errors += 1
            print(f"soak_storage: GET offset {offset} answered {r.status}: {body[:200]!r}", file=sys.stderr)
            break
        lines = [l for l in body.split(b"\n") if l]
        if not lines:
            break
        for l in lines:
            rec = json.loads(l)
            stored[rec["offset"]] = rec.get("value")
        offset = int(r.getheader("X-Next-Offset"))
    missing = sum(1 for o in acked if o not in stored)
    wrong = sum(1 for o, v in acked.items() if o in stored and stored[o] != v)
    print(f"RESULT acked={len(acked)} found={len(acked) - missing} missing={missing} wrong={wrong} errors={errors}")
    return 0 if errors == 0 and missing == 0 and wrong == 0 else 1


def main(argv):
    if len(argv) == 6 and argv[1] == "append":
        return append(int(argv[2]), argv[3], float(argv[4]), argv[5])
    if len(argv) == 5 and argv[1] == "verify":
        return verify(int(argv[2]), argv[3], argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
