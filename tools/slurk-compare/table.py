#!/usr/bin/env python3
"""Prints the results of run.sh (RESULTS/slurk-N.json, RESULTS/wozkit-N.json) as a Markdown table."""

import glob
import json
import os
import sys


def row(system, r):
    if system == "Slurk":
        lat, rate = r, r["messages_per_s"]
        cpu, machine = r["server_cpu_pct"], r["machine"]
        foreign, client = machine["foreign_pct"], r["client_cpu_pct"]
        errors = dict(r["errors"])
        if r["lost_in_window"]:
            errors["lost"] = r["lost_in_window"]
        if r["skipped_ticks"]:
            errors["ticks skipped (ack late)"] = r["skipped_ticks"]
    else:
        lat, rate = r["latency"], r["messages_per_s"]
        cpu = r["server"]["cpu_percent"]
        foreign = r["machine"]["foreign_cpu_percent"]
        client = r["machine"]["loadgen_cpu_percent"]
        errors = dict(r["errors"])
        if r.get("skipped_busy"):
            errors["ticks skipped (ack late)"] = r["skipped_busy"]
    full = r["participants"] / 2
    errs = ", ".join(f"{v} {k}" for k, v in sorted(errors.items())) or "none"
    return (f"| {system} | {r['participants']:,} | {rate:.1f} of {full:.0f} | {lat['p50_ms']:.1f} | "
            f"{lat['p90_ms']:.1f} | {lat['p99_ms']:.1f} | {lat['max_ms']:.0f} | {cpu:.0f} % | "
            f"{client:.0f} % | {foreign:.0f} % | {errs} |")


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else "/tmp/slurk-compare/results"
    print("| server | participants | messages/s | p50 ms | p90 ms | p99 ms | max ms "
          "| server CPU | load client CPU | foreign CPU | errors |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    runs = []
    for path in glob.glob(os.path.join(results, "*.json")):
        system, n = os.path.basename(path)[:-5].rsplit("-", 1)
        with open(path) as f:
            runs.append((int(n), system, json.load(f)))
    for n, system, r in sorted(runs, key=lambda x: (x[0], x[1])):
        print(row("Slurk" if system == "slurk" else "wozkit", r))


if __name__ == "__main__":
    main()
