#!/usr/bin/env python3
"""Draws the benchmark report's charts (PNG, gnuplot) from the tables in bench/RESULTS.md.

  scripts/bench-charts.py [RESULTS.md] [OUT_DIR]   (defaults: bench/RESULTS.md, bench/charts)

Charts, each LioNet beside its reference from the same run:
  fiber-switch.png     ns per switch vs worker threads (BM_FiberSwitch/1000), Boost.Fiber yield
  fiber-create.png     ns per fiber created vs threads (BM_FiberCreation/1000), Boost.Fiber create+join
  echo.png             echo QPS vs connections, LioNet epoll / io_uring vs the epoll reference, Go, Asio
  http-modes.png       MB/s vs file size per LioNet file mode, nginx on the same file
  storage-batch.png    append MB/s vs records per batch (1 KiB records), the raw-writer reference
A section missing from RESULTS.md skips its chart (said on stderr). The data files gnuplot
reads are written beside the PNGs (*.dat), so a chart can be checked against its numbers.
Last line: RESULT charts=N skipped=N errors=N
"""
import os
import re
import subprocess
import sys


def section(text, name):
    m = re.search(rf"<!-- {name}:begin -->(.*?)<!-- {name}:end -->", text, re.S)
    return m.group(1) if m else None


def rows(sec):
    """Markdown table rows as lists of stripped cells (header and separator rows skipped)."""
    out = []
    for line in sec.splitlines():
        if not line.startswith("|") or set(line.replace("|", "").strip()) <= set("-: "):
            continue
        out.append([c.strip() for c in line.strip().strip("|").split("|")])
    return out


def num(s):
    m = re.search(r"-?[0-9]+(\.[0-9]+)?", s.replace(",", ""))
    return float(m.group(0)) if m else None


def plot(out_dir, name, title, xlabel, ylabel, series, logx=False, logy=False, xtics=None):
    """series: list of (label, [(x, y), ...])."""
    series = [(label, pts) for label, pts in series if pts]
    if not series:
        return False
    dat = os.path.join(out_dir, name + ".dat")
    with open(dat, "w") as f:
        for label, pts in series:
            f.write(f"# {label}\n")
            for x, y in pts:
                f.write(f"{x} {y}\n")
            f.write("\n\n")
    cmds = [
        "set terminal pngcairo size 900,540 font 'sans,11'" if has_cairo() else "set terminal png size 900,540",
        f"set output '{os.path.join(out_dir, name + '.png')}'",
        f"set title '{title}'", f"set xlabel '{xlabel}'", f"set ylabel '{ylabel}'",
        "set termoption noenhanced", "set autoscale xfix", "set offsets graph 0.03, graph 0.03, 0, 0",
        "set grid", "set key outside right top", "set yrange [0:*]" if not logy else "set logscale y",
    ]
    if logx:
        cmds.append("set logscale x")
    if xtics:
        cmds.append("set xtics (" + ", ".join(f"'{l}' {v}" for l, v in xtics) + ")")
    plots = [f"'{dat}' index {i} with linespoints lw 2 pt 7 title '{label}'" for i, (label, _) in enumerate(series)]
    cmds.append("plot " + ", ".join(plots))
    subprocess.run(["gnuplot"], input="\n".join(cmds), text=True, check=True)
    return True


_cairo = None


def has_cairo():
    global _cairo
    if _cairo is None:
        r = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
        _cairo = "pngcairo" in (r.stdout + r.stderr)
    return _cairo


def fiber_charts(sec, out):
    made = 0
    for bench, ref_label, name, what in (("BM_FiberSwitch/1000", "Boost.Fiber yield", "fiber-switch", "ns per switch"),
                                         ("BM_FiberCreation/1000", "Boost.Fiber create+join", "fiber-create",
                                          "ns per fiber")):
        ours, ref = [], []
        for r in rows(sec):
            m = re.match(re.escape(bench) + r"/threads:(\d+)$", r[0])
            if m and len(r) >= 6:
                t = int(m.group(1))
                ours.append((t, num(r[1])))
                ref.append((t, num(r[4])))
        made += plot(out, name, f"{what} vs worker threads ({bench})", "threads", what,
                     [("LioNet", ours), (ref_label, ref)], logx=True,
                     xtics=[(str(t), t) for t, _ in ours])
    return made


def echo_chart(sec, out):
    series = {}
    for r in rows(sec):
        if len(r) >= 5 and r[1].isdigit():
            label = r[0].replace("LioNet bench_server, 1 worker, ", "LioNet ").replace(" (reference, 1 thread)", "")
            label = re.sub(r" \(reference.*\)", "", label)
            series.setdefault(label, []).append((int(r[1]), num(r[2])))
    return plot(out, "echo", "Echo 256 B, 1 server thread: QPS vs connections", "connections", "requests/s",
                sorted(series.items()), logx=True, xtics=[("100", 100), ("1000", 1000)])


def size_bytes(s):
    m = re.match(r"(\d+)\s*([kmKM])", s)
    return int(m.group(1)) * (1024 if m.group(2).lower() == "k" else 1 << 20) if m else None


def http_chart(sec, out):
    ours, nginx = {}, []
    seen = set()
    for r in rows(sec):
        # The "MB/s per mode" table only: its sizes are written 1k / 64k / 1m (B2's are "16 KiB").
        if len(r) >= 7 and r[0] in ("memory", "chunk", "sendfile") and re.fullmatch(r"\d+[km]", r[1]):
            size = size_bytes(r[1])
            ours.setdefault(f"LioNet {r[0]}", []).append((size, num(r[2])))
            if size not in seen:
                seen.add(size)
                nginx.append((size, num(r[5])))
    series = [(k, sorted(v)) for k, v in sorted(ours.items())] + [("nginx (sendfile on)", sorted(nginx))]
    return plot(out, "http-modes", "Static files, keep-alive, 16 connections: MB/s vs file size per mode",
                "file size (bytes)", "MB/s", series, logx=True,
                xtics=[("1 KiB", 1024), ("64 KiB", 65536), ("1 MiB", 1 << 20), ("10 MiB", 10 << 20)])


def storage_chart(sec, out):
    ours, ref = [], []
    for r in rows(sec):
        m = re.match(r"`BM_Append(Batch)?/1024/(\d+)`", r[0])
        if not m or r[1] != "none":
            continue
        batch = int(m.group(2)) if m.group(1) else 1
        if not m.group(1) and m.group(2) != "1000":
            continue  # single appends: one row (1000 records per iteration) stands for batch 1
        ours.append((batch, num(r[2])))
        if num(r[5]) is not None:
            ref.append((batch, num(r[5])))
    return plot(out, "storage-batch", "Append 1 KiB records, page cache: MB/s vs records per batch",
                "records per batch", "MB/s", [("LioNet Log", sorted(ours)), ("raw writer (logbench)", sorted(ref))],
                logx=True, xtics=[("1", 1), ("10", 10), ("100", 100), ("1000", 1000)])


def main(argv):
    results = argv[1] if len(argv) > 1 else "bench/RESULTS.md"
    out = argv[2] if len(argv) > 2 else "bench/charts"
    os.makedirs(out, exist_ok=True)
    text = open(results).read()
    made = skipped = errors = 0
    for name, fn in (("fiber", fiber_charts), ("echo", echo_chart), ("http", http_chart), ("storage", storage_chart)):
        sec = section(text, name)
        if sec is None:
            print(f"bench-charts: no {name} section in {results}: chart skipped", file=sys.stderr)
            skipped += 1
            continue
        try:
            n = int(fn(sec, out))
            made += n
            if n == 0:
                print(f"bench-charts: the {name} section has no rows to plot", file=sys.stderr)
                skipped += 1
        except (subprocess.CalledProcessError, ValueError, TypeError) as e:
            print(f"bench-charts: {name}: {e}", file=sys.stderr)
            errors += 1
    print(f"bench-charts: {made} chart(s) in {out}")
    print(f"RESULT charts={made} skipped={skipped} errors={errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
