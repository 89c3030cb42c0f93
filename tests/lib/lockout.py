#!/usr/bin/env python3
"""tests/lib/lockout.py - the lock-out attacks of issue 37 on heapctl serve,
as a local user would make them (cli/serve_lockout, bench/serve.sh).

  lockout.py HOST:PORT silent N SECS    N connections that send nothing
  lockout.py HOST:PORT slow N SECS      N connections that send a request's
                                        headers a byte every 2 s
  lockout.py HOST:PORT abandon N PATH   N requests for PATH whose clients
                                        leave after 1 s
  lockout.py HOST:PORT bad N            N malformed requests, one a connection
  lockout.py HOST:PORT normal PATH SECS  the victim: GET PATH over and over for
                                        SECS, a new connection each, and print
                                        "ok N failed F per_second R"

silent and slow with a fifth argument "renew" open a new connection for
each one the server closes, as a determined attacker would (make bench).

It holds the connections for SECS (silent, slow), then prints one line:
"opened N refused R closed_by_server C" (refused: answered or closed by
the server at once; closed_by_server: closed while held).  abandon prints
"sent N answered_429 A" and bad "sent N".
"""
import socket
import sys
import time


def connect(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=5)
    s.setblocking(False)
    return s


def closed(s):
    """True when the server closed (or answered and closed) s."""
    try:
        data = s.recv(4096)
        return data == b"" or data.startswith(b"HTTP/1.1 4")
    except BlockingIOError:
        return False
    except OSError:
        return True


def hold(addr, n, secs, slow, renew=False):
    socks = []
    for _ in range(n):
        try:
            socks.append(connect(addr))
        except OSError:
            pass
    time.sleep(0.5)
    refused = sum(1 for s in socks if closed(s))
    line = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4096
    pos, gone = 0, set()
    end = time.time() + secs
    while time.time() < end:
        if renew:
            for i, s in enumerate(socks):
                if i in gone or closed(s):
                    s.close()
                    try:
                        socks[i] = connect(addr)
                        gone.discard(i)
                    except OSError:
                        gone.add(i)
        if slow:
            for i, s in enumerate(socks):
                if i not in gone:
                    try:
                        s.send(line[pos:pos + 1])
                    except OSError:
                        gone.add(i)
            pos += 1
        time.sleep(2 if slow else 0.5)
    closed_by_server = sum(1 for i, s in enumerate(socks) if i in gone or closed(s))
    print(f"opened {len(socks)} refused {refused} closed_by_server {closed_by_server}", flush=True)


def abandon(addr, n, path):
    socks = []
    req = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    for _ in range(n):
        try:
            s = connect(addr)
            s.send(req)
            socks.append(s)
        except OSError:
            pass
    time.sleep(1)
    answered = 0
    for s in socks:
        try:
            answered += s.recv(64).startswith(b"HTTP/1.1 429")
        except OSError:
            pass
        s.close()
    print(f"sent {len(socks)} answered_429 {answered}", flush=True)


def bad(addr, n):
    sent = 0
    for i in range(n):
        try:
            s = connect(addr)
            s.setblocking(True)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nbroken header %d\r\n\r\n" % i)
            s.recv(256)
            s.close()
            sent += 1
        except OSError:
            pass
    print(f"sent {sent}", flush=True)


def normal(addr, path, secs):
    import http.client
    host, port = addr.rsplit(":", 1)
    ok = failed = 0
    t0 = time.time()
    while time.time() - t0 < secs:
        try:
            c = http.client.HTTPConnection(host, int(port), timeout=10)
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            c.close()
            if r.status == 200:
                ok += 1
            else:
                failed += 1
        except OSError:
            failed += 1
            time.sleep(0.1)
    el = time.time() - t0
    print(f"ok {ok} failed {failed} per_second {ok / el:.1f}", flush=True)


def main():
    addr, mode = sys.argv[1], sys.argv[2]
    if mode in ("silent", "slow"):
        hold(addr, int(sys.argv[3]), float(sys.argv[4]), mode == "slow", sys.argv[5:] == ["renew"])
    elif mode == "abandon":
        abandon(addr, int(sys.argv[3]), sys.argv[4])
    elif mode == "normal":
        normal(addr, sys.argv[3], float(sys.argv[4]))
    elif mode == "bad":
        bad(addr, int(sys.argv[3]))
    else:
        sys.exit("lockout.py: unknown mode " + mode)


if __name__ == "__main__":
    main()
