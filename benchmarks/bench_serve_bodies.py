"""Bodies without Content-Length (issue 35), measured on `scratchformer serve models/en-zh` (a subprocess on 127.0.0.1,
default limits): two clients each post a chunked form body of --mib MiB at the same time ("q=xxx...&q=xxx...":
fields just under 1 MiB each, which is what Starlette's form parser allows per field, up to its 1,000 fields),
and one client a chunked multipart upload with a file part; the server's resident memory (VmRSS) is sampled
every 50 ms, and the size of the unlinked temporary files it holds open (spooled uploads). A client stops sending as
soon as the server answered or closed the connection, so a server that refuses at its limit ends the run in a
second; one that reads everything takes as long as the upload. Linux only (/proc).

    python benchmarks/bench_serve_bodies.py [--mib 1024] [--src /elsewhere/src]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 1 << 20


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def spooled(pid: int) -> int:
    """Bytes in the deleted (unlinked temporary) regular files the process holds open."""
    total = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd).endswith("(deleted)"):
                total += os.stat(fd).st_size
        except OSError:
            continue
    return total


def start(src: Path, run: Path) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "scratchformer", "serve", str(run), "--port", "0", "--threads",
                             "1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if " on http://" in line:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, line.rsplit(" on ", 1)[1].strip()
    raise SystemExit(f"the server did not start (exit {proc.wait()})")


def chunked_post(url: str, kind: str, head: bytes, filler: bytes, mib: int, out: dict) -> None:
    """POST head + filler..., chunked, until `mib` MiB were sent or the server answered / closed; then its
    status."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    conn.putrequest("POST", "/translate")
    conn.putheader("Content-Type", kind)
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    sock: socket.socket = conn.sock
    sent, start = 0, time.monotonic()
    try:
        for i in range(mib):
            piece = head + filler[len(head):] if i == 0 else filler
            conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
            sent += len(piece)
            if select.select([sock], [], [], 0)[0]:  # the server answered (or closed) before the end: stop
                break
        else:
            conn.send(b"0\r\n\r\n")
    except OSError as e:
        out["send_error"] = type(e).__name__
    out["sent_mib"] = round(sent / CHUNK)
    try:
        response = conn.getresponse()
        out["status"], out["answer"] = response.status, response.read()[:120].decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as e:
        out["status"] = type(e).__name__
    out["seconds"] = round(time.monotonic() - start, 2)
    conn.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", type=Path, default=ROOT / "src", help="the source tree the server runs")
    p.add_argument("--run", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--mib", type=int, default=1024, help="MiB each client sends at most (default 1024)")
    args = p.parse_args()

    proc, url = start(args.src, args.run)
    try:
        idle = rss(proc.pid)
        form = ("form", "application/x-www-form-urlencoded", b"q=", b"x" * (CHUNK - 3) + b"&q=")
        clients = [form, form, ("multipart upload", "multipart/form-data; boundary=bNd",
                                b'--bNd\r\nContent-Disposition: form-data; name="q"; filename="big.txt"\r\n\r\n',
                                b"x" * CHUNK)]
        outs: list[dict] = [{"client": name} for name, *_ in clients]
        threads = [threading.Thread(target=chunked_post, args=(url, kind, head, filler, args.mib, out), daemon=True)
                   for (_, kind, head, filler), out in zip(clients, outs)]
        for t in threads:
            t.start()
        peak_rss = peak_tmp = 0
        while any(t.is_alive() for t in threads):
            peak_rss, peak_tmp = max(peak_rss, rss(proc.pid)), max(peak_tmp, spooled(proc.pid))
            time.sleep(0.05)
        time.sleep(1)
        after = rss(proc.pid)
        print(json.dumps({"src": str(args.src), "mib_per_client": args.mib, "rss_idle_mib": idle >> 20,
                          "rss_peak_mib": peak_rss >> 20, "rss_after_mib": after >> 20,
                          "spooled_tmp_peak_mib": peak_tmp >> 20, "clients": outs}, ensure_ascii=False))
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
