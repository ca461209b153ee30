#!/usr/bin/env python3
"""leanseq serve under hostile clients: /health latency and the server's peak memory while one
100 000-character sentence (refused, or with --truncate-long-inputs cut and decoded), 200 idle
connections and 40 slowloris connections hit it. Prints JSON.

usage: bench/serve_hostile.py CHECKPOINT [--leanseq build/leanseq] [--truncate]"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def health_seconds(port):
    start = time.monotonic()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
            r.read()
    except OSError:
        return None
    return time.monotonic() - start


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("--leanseq", default="build/leanseq")
    ap.add_argument("--truncate", action="store_true", help="serve with --truncate-long-inputs")
    a = ap.parse_args()
    if not os.path.exists(a.checkpoint) or not os.access(a.leanseq, os.X_OK):
        print(f"serve_hostile: no checkpoint {a.checkpoint} or no program {a.leanseq}", file=sys.stderr)
        return 2
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    cmd = [a.leanseq, "serve", "--checkpoint", a.checkpoint, "--port", "0", "--threads", "2"]
    if a.truncate:
        cmd.append("--truncate-long-inputs")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    port = None
    for _ in range(300):
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", open(log.name).read())
        if m:
            port = int(m.group(1))
            break
        time.sleep(0.1)
    out = {"checkpoint": a.checkpoint, "truncate_long_inputs": a.truncate}
    try:
        out["rss_at_start_mib"] = peak_rss_mib(server.pid)
        text = ("Ein Mann fährt auf einem Fahrrad durch die Stadt. " * 2000)[:100000]
        body = json.dumps({"text": text}).encode()
        start = time.monotonic()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/translate", body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as r:
                out["long_request_status"] = r.status
        except urllib.error.HTTPError as e:
            out["long_request_status"] = e.code
        out["long_request_seconds"] = round(time.monotonic() - start, 3)
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(200)]
        time.sleep(0.3)
        out["health_seconds_with_200_idle"] = health_seconds(port)
        slow = []
        for _ in range(40):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            slow.append(s)
        worst = 0.0
        for t in range(6):
            for s in slow:
                try:
                    s.sendall(f"X-{t}: 1\r\n".encode())
                except OSError:
                    pass
            h = health_seconds(port)
            worst = max(worst, h if h is not None else 99.0)
            time.sleep(1)
        out["worst_health_seconds_with_40_slowloris"] = round(worst, 3)
        for s in idle + slow:
            s.close()
        out["peak_rss_mib"] = peak_rss_mib(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
        os.unlink(log.name)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
