#!/usr/bin/env python3
"""Replaces one section of bench/RESULTS.md, between <!-- NAME:begin --> and <!-- NAME:end -->.

Usage: write-results-section.py NAME SECTION_FILE [RESULTS_FILE]
Each benchmark script owns one named section; the others are left as they are. A missing
section is appended; a missing file is created with a short header.
"""
import os
import sys

name, section_file = sys.argv[1], sys.argv[2]
path = sys.argv[3] if len(sys.argv) > 3 else "bench/RESULTS.md"
section = open(section_file).read().rstrip("\n")
begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
block = f"{begin}\n{section}\n{end}"
header = "# LioNet benchmark results\n\nEach section is written by its script with `--write`; do not edit between the markers.\n"
text = open(path).read() if os.path.exists(path) else header
if begin in text and end in text and text.index(begin) < text.index(end):
    text = text[: text.index(begin)] + block + text[text.index(end) + len(end):]
else:
    text = text.rstrip("\n") + "\n\n" + block + "\n"
open(path, "w").write(text)
