#!/usr/bin/env python3
"""cdp.py URL [--shot FILE] [--wait SECONDS] EXPR... - load URL in headless
Chromium and drive it through the DevTools protocol, with the standard
library only (a WebSocket client of its own): after the load, each EXPR (a
JavaScript expression; a promise is awaited) is evaluated in the page in
turn and its value printed as one JSON line; --shot saves a PNG of the page.
Exit status 1 if Chromium does not start or an EXPR throws."""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request


class WebSocket:
    def __init__(self, url):
        assert url.startswith("ws://")
        hostport, path = url[5:].split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.s.recv(1)
            if not chunk:
                raise OSError("the DevTools socket closed during the handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise OSError("no WebSocket upgrade: %r" % head[:80])

    def _read(self, n):
        b = b""
        while len(b) < n:
            chunk = self.s.recv(n - len(b))
            if not chunk:
                raise OSError("the DevTools socket closed")
            b += chunk
        return b

    def send(self, text):
        data = text.encode()
        n = len(data)
        head = bytes([0x81])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7f
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            op = b0 & 0x0f
            if op == 9:                       # ping: answer, keep reading
                continue
            if op in (0, 1, 2):
                message += payload
                if b0 & 0x80:
                    return message.decode()


class Page:
    def __init__(self, ws):
        self.ws, self.next_id = ws, 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m["result"]


def main():
    args = sys.argv[1:]
    shot, wait, exprs = None, 0.0, []
    while args:
        a = args.pop(0)
        if a == "--shot":
            shot = args.pop(0)
        elif a == "--wait":
            wait = float(args.pop(0))
        else:
            exprs.append(a)
    url, exprs = exprs[0], exprs[1:]
    profile = tempfile.mkdtemp(prefix="heapctl-cdp.")
    chrome = subprocess.Popen(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--remote-debugging-port=0", "--user-data-dir=" + profile,
                               "--window-size=1280,900", "about:blank"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        for _ in range(300):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.1)
        else:
            print("cdp.py: Chromium did not open its DevTools port", file=sys.stderr)
            return 1
        port = open(port_file).read().split()[0]
        pages = json.load(urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port, timeout=30))
        ws = next(p["webSocketDebuggerUrl"] for p in pages if p.get("type") == "page")
        page = Page(WebSocket(ws))
        page.call("Page.navigate", url=url)
        for _ in range(300):
            r = page.call("Runtime.evaluate", expression="document.readyState", returnByValue=True)
            if r["result"].get("value") == "complete":
                break
            time.sleep(0.1)
        time.sleep(wait)
        for e in exprs:
            r = page.call("Runtime.evaluate", expression=e, awaitPromise=True, returnByValue=True)
            if "exceptionDetails" in r:
                print("cdp.py: %s threw: %s" % (e, r["exceptionDetails"].get("text")), file=sys.stderr)
                return 1
            print(json.dumps(r["result"].get("value")))
        if shot:
            png = page.call("Page.captureScreenshot", format="png")["data"]
            with open(shot, "wb") as f:
                f.write(base64.b64decode(png))
        return 0
    finally:
        chrome.kill()
        chrome.wait()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
