#!/usr/bin/env python3
"""Load client for a running Slurk server: the workload of `wozkit bench`.

N participants in pairs, one Slurk room per pair, made through Slurk's REST API with
its admin token (a layout, a permissions entry allowing text messages, then per pair
a room and two room tokens). Each participant opens its login link
(`/login/?name=..&token=..`, which creates its user and sets the session cookie, as a
browser does), connects a Socket.IO client with that cookie, waits for
`joined_room`, and then sends one
`text` event every 1/rate seconds (random phase), never more than one unanswered.
Delivery latency runs from the send to the partner's receipt of the `text_message`.

Reports latency p50/p90/p99/max over the measured window, messages/s, errors by
kind, the server's CPU over the window (--server-pid) and how busy the machine was
(foreign CPU: user+nice+system time of neither this client nor the server).
Only addresses on this machine are accepted.
"""

import argparse
import asyncio
import json
import os
import random
import sys
import time
from collections import Counter
from urllib.parse import urlparse

import aiohttp
import socketio

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    """CPU seconds (user + system) used so far by process `pid`."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def machine_cpu():
    """(busy user+nice+system seconds, steal seconds, total seconds) of the machine."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    return (user + nice + system) / TICK, steal / TICK, sum(v[:8]) / TICK


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, int(round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


class Run:
    def __init__(self, args):
        self.args = args
        self.errors = Counter()
        self.sent_at = {}  # message id -> send instant
        self.latencies = []  # ms, inside the window
        self.acked_in_window = 0
        self.skipped = 0
        self.joined = 0
        self.window = None  # (start, end) instants
        self.all_joined = asyncio.Event()
        self.stop = asyncio.Event()

    def in_window(self, t):
        return self.window is not None and self.window[0] <= t < self.window[1]


async def rest(session, method, url, token, body=None):
    headers = {"Authorization": f"Bearer {token}"}
    async with session.request(method, url, json=body, headers=headers) as r:
        text = await r.text()
        if r.status >= 300:
            raise RuntimeError(f"{method} {url}: HTTP {r.status}: {text[:200]}")
        return json.loads(text)


async def setup(args, run):
    """Creates the layout, permissions, rooms, tokens and users; returns participants."""
    api = args.url.rstrip("/") + "/slurk/api"
    participants = []
    async with aiohttp.ClientSession() as s:
        layout = await rest(s, "POST", f"{api}/layouts", args.admin_token, {"title": "bench"})
        perms = await rest(
            s, "POST", f"{api}/permissions", args.admin_token, {"send_message": True}
        )
        sem = asyncio.Semaphore(16)

        async def pair(p):
            async with sem:
                room = await rest(
                    s, "POST", f"{api}/rooms", args.admin_token, {"layout_id": layout["id"]}
                )
                out = []
                for k in range(2):
                    tok = await rest(
                        s, "POST", f"{api}/tokens", args.admin_token,
                        {"permissions_id": perms["id"], "room_id": room["id"]},
                    )
                    out.append({"i": 2 * p + k, "room": room["id"], "token": tok["id"]})
                return out

        for pr in await asyncio.gather(*(pair(p) for p in range(args.participants // 2))):
            participants.extend(pr)
    return participants


async def participant(run, me):
    args = run.args
    sio = socketio.AsyncClient(reconnection=False)
    joined = asyncio.Event()
    seq = 0

    @sio.on("joined_room")
    async def on_joined(data):
        me["user"] = data.get("user")
        joined.set()

    @sio.on("text_message")
    async def on_text(data):
        if data.get("user", {}).get("id") == me["user"]:
            return  # our own message, echoed to the whole room
        now = time.monotonic()
        t0 = run.sent_at.pop(data.get("msg"), None)
        if t0 is None:
            run.errors["unknown_message"] += 1
        elif run.in_window(t0):
            run.latencies.append((now - t0) * 1000.0)

    @sio.on("disconnect")
    async def on_disconnect():
        if not run.stop.is_set():
            run.errors["disconnected"] += 1

    try:
        # The login link a participant opens: creates the user, sets the session cookie.
        login = f"{args.url.rstrip('/')}/login/?name=bench-{me['i']}&token={me['token']}"
        async with aiohttp.ClientSession() as s:
            async with s.get(login, allow_redirects=False) as r:
                if r.status != 302 or "session" not in r.cookies:
                    raise RuntimeError(f"login: HTTP {r.status}")
                headers = {"Cookie": f"session={r.cookies['session'].value}"}
        me["user"] = None
        await sio.connect(args.url, headers=headers, transports=["websocket"],
                          wait_timeout=60)
        await asyncio.wait_for(joined.wait(), 60)
    except Exception as e:  # noqa: BLE001 - counted and reported
        run.errors[f"connect:{type(e).__name__}"] += 1
        return
    run.joined += 1
    if run.joined == args.participants:
        run.all_joined.set()
    await run.all_joined.wait()

    period = 1.0 / args.rate
    next_tick = time.monotonic() + random.random() * period
    while not run.stop.is_set():
        delay = next_tick - time.monotonic()
        if delay > 0:
            try:
                await asyncio.wait_for(run.stop.wait(), delay)
                break
            except asyncio.TimeoutError:
                pass
        next_tick += period
        seq += 1
        msg = f"{me['i']}:{seq}"
        t0 = time.monotonic()
        run.sent_at[msg] = t0
        try:
            ok = await sio.call("text", {"msg": msg, "room": me["room"]}, timeout=30)
        except Exception as e:  # noqa: BLE001
            run.errors[f"call:{type(e).__name__}"] += 1
            continue
        if ok is not True and not (isinstance(ok, (list, tuple)) and ok and ok[0] is True):
            run.errors[f"refused:{ok}"] += 1
        elif run.in_window(t0):
            run.acked_in_window += 1
        while time.monotonic() > next_tick:  # never more than one unanswered
            next_tick += period
            run.skipped += 1
    await sio.disconnect()


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:5000")
    ap.add_argument("--admin-token", required=True)
    ap.add_argument("--participants", type=int, default=100)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--rate", type=float, default=0.5, help="messages per second each")
    ap.add_argument("--server-pid", type=int, help="the Slurk worker process")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if urlparse(args.url).hostname not in ("127.0.0.1", "localhost"):
        sys.exit(f"refusing {args.url}: only 127.0.0.1 or localhost")
    if args.participants < 2 or args.participants % 2:
        sys.exit("--participants must be an even number >= 2")

    run = Run(args)
    t_setup = time.monotonic()
    people = await setup(args, run)
    t_connect = time.monotonic()
    tasks = [asyncio.create_task(participant(run, me)) for me in people]
    try:
        await asyncio.wait_for(run.all_joined.wait(), 120 + args.participants / 5)
    except asyncio.TimeoutError:
        run.errors["not_all_joined"] += 1
        run.all_joined.set()
    ramp = time.monotonic() - t_connect
    await asyncio.sleep(1.0)  # let the first ticks start

    start = time.monotonic()
    run.window = (start, start + args.duration)
    cpu0 = proc_cpu(args.server_pid) if args.server_pid else None
    me0, m0 = proc_cpu(os.getpid()), machine_cpu()
    await asyncio.sleep(args.duration)
    cpu1 = proc_cpu(args.server_pid) if args.server_pid else None
    me1, m1 = proc_cpu(os.getpid()), machine_cpu()
    await asyncio.sleep(min(10.0, args.duration))  # late deliveries of window sends
    lost = sum(1 for t in run.sent_at.values() if run.in_window(t))
    run.stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)

    wall = args.duration
    server_cpu = (cpu1 - cpu0) / wall if cpu0 is not None else None
    client_cpu = (me1 - me0) / wall
    busy = (m1[0] - m0[0]) / wall
    foreign = busy - client_cpu - (server_cpu or 0.0)
    steal = (m1[1] - m0[1]) / max(1e-9, m1[2] - m0[2])
    lat = sorted(run.latencies)
    report = {
        "participants": args.participants, "joined": run.joined,
        "setup_s": round(t_connect - t_setup, 1), "ramp_up_s": round(ramp, 1),
        "duration_s": wall, "messages_per_s": round(run.acked_in_window / wall, 1),
        "samples": len(lat),
        "p50_ms": round(percentile(lat, 0.50), 2), "p90_ms": round(percentile(lat, 0.90), 2),
        "p99_ms": round(percentile(lat, 0.99), 2), "max_ms": round(lat[-1], 2) if lat else None,
        "lost_in_window": lost, "skipped_ticks": run.skipped, "errors": dict(run.errors),
        "server_cpu_pct": round(100 * server_cpu, 1) if server_cpu is not None else None,
        "server_cpu_per_msg_us": round(1e6 * server_cpu * wall / max(1, run.acked_in_window))
        if server_cpu is not None else None,
        "client_cpu_pct": round(100 * client_cpu, 1),
        "machine": {"cpus": os.cpu_count(), "busy_pct": round(100 * busy, 1),
                    "foreign_pct": round(100 * foreign, 1), "steal_pct": round(100 * steal, 2),
                    "quiet": foreign <= 0.10 and steal <= 0.02},
    }
    if args.json:
        print(json.dumps(report))
    else:
        for k, v in report.items():
            print(f"{k}: {v}")
    if not report["machine"]["quiet"]:
        print(f"WARNING: machine not quiet (foreign CPU {report['machine']['foreign_pct']} % "
              f"of one core, steal {report['machine']['steal_pct']} %)", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
