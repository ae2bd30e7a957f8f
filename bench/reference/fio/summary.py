#!/usr/bin/env python3
"""Turns fio's JSON report (stdin) into the one line the benchmark scripts read.

  summary.py read   ->  "<read IOPS> IOPS  <read MB/s> MB/s"        (randread.sh)
  summary.py rw     ->  "read <read IOPS> IOPS  write <write IOPS> IOPS"   (seed-randrw.sh)
With group_reporting the first job holds the totals of the group.
"""
import json
import sys

text = sys.stdin.read()
report = json.loads(text[text.index("{"):])  # fio may print notes before the JSON
job = report["jobs"][0]
if sys.argv[1:] == ["read"]:
    print("%.0f IOPS  %.1f MB/s" % (job["read"]["iops"], job["read"]["bw_bytes"] / 1e6))
elif sys.argv[1:] == ["rw"]:
    print("read %.0f IOPS  write %.0f IOPS" % (job["read"]["iops"], job["write"]["iops"]))
else:
    sys.exit("usage: summary.py read|rw < fio-json")
