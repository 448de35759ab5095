#!/usr/bin/env python3
"""Holds N idle keep-alive connections open to an HTTP server, for bench_memory.sh.

usage: idle_conns.py PORT N PATH
Opens the connections one after another (so the proxy behind PORT reuses one backend
connection), sends one keep-alive GET of PATH on each and reads its whole response
(Content-Length), then prints "held N" and keeps every connection open and silent
until its standard input closes; then closes them and exits 0. Anything but a 200 with
its full body is an error (exit 1, the reason on stderr). Loopback only.
"""
import resource
import socket
import sys


def read_response(s, buf):
    """Reads one response with a Content-Length body from s; returns (status, rest)."""
    while b"\r\n\r\n" not in buf:
        b = s.recv(65536)
        if not b:
            raise OSError("connection closed before the response head")
        buf += b
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
    while len(rest) < length:
        b = s.recv(65536)
        if not b:
            raise OSError("connection closed in the response body")
        rest += b
    return status, rest[length:]


def main():
    port, n, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
    req = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    conns = []
    try:
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(req)
            status, extra = read_response(s, b"")
            if status != 200 or extra:
                raise OSError(f"connection {i}: status {status}, {len(extra)} unexpected bytes")
            conns.append(s)
    except OSError as e:
        print(f"idle_conns: {e}", file=sys.stderr)
        return 1
    print(f"held {len(conns)}", flush=True)
    sys.stdin.read()  # until the benchmark closes our input
    for s in conns:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
