#!/usr/bin/env python3
"""ui_browser.py — drive headless Debian chromium over the DevTools protocol
for tests/e2e/ui.bats, with python3's standard library only (a minimal
websocket client: the protocol's frames are small JSON texts).

usage: ui_browser.py URL STEP...   where each STEP is one of
  wait:JS       evaluate JS until it is truthy (15 s at most, else exit 1)
  click:CSS     click the first element matching the selector
  run:CMD       run a shell command (its failure fails the script)
  shot:FILE     save a PNG screenshot of the page
  print:JS      print JS's value (JSON) on stdout
  nav:URL       load another URL (wait for it with a wait: step)
  nojs:         reload the page with its scripts off: what it shows before
                any of its JavaScript ran (its first paint)
Exit status 0 when every step held; on failure the page's text goes to
stderr, so a test says what the page showed instead.
"""
import base64, json, os, shutil, socket, struct, subprocess, sys, tempfile, time
import urllib.request

# every wait is the suite's (KILN_WAIT, 60 s): on a busy machine chromium's
# start alone took longer than 15 s
TIMEOUT = float(os.environ.get("KILN_WAIT", "60"))


class WS:
    """A websocket client: enough for DevTools (text frames, no extensions)."""

    def __init__(self, url):
        assert url.startswith("ws://")
        hostport, path = url[5:].split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=TIMEOUT)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.s.recv(1)
            if not chunk:
                raise RuntimeError("devtools closed the connection")
            head += chunk
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise RuntimeError("devtools refused the websocket: %r" % head)

    def send(self, text):
        data = text.encode()
        n = len(data)
        hdr = bytes([0x81])
        if n < 126:
            hdr += bytes([0x80 | n])
        elif n < 65536:
            hdr += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            hdr += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.s.sendall(hdr + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _read(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.s.recv(n - len(buf))
            if not chunk:
                raise RuntimeError("devtools closed the connection")
            buf += chunk
        return buf

    def recv(self):
        msg = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(n)
            msg += payload
            if b0 & 0x80:
                return msg.decode()


class Page:
    def __init__(self, ws):
        self.ws, self.id = ws, 0

    def call(self, method, **params):
        self.id += 1
        self.ws.send(json.dumps({"id": self.id, "method": method, "params": params}))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == self.id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m.get("result", {})

    def eval(self, js):
        r = self.call("Runtime.evaluate", expression=js, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            return None
        return r.get("result", {}).get("value")


def start_browser(profile):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    p = subprocess.Popen([exe, "--headless=new", "--no-sandbox", "--disable-gpu",
                          "--no-first-run", "--remote-debugging-port=0",
                          "--user-data-dir=" + profile, "--window-size=1400,1000",
                          "about:blank"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # chromium writes the port once it listens; the wait ends early if it
    # died
    port_file = os.path.join(profile, "DevToolsActivePort")
    end = time.time() + TIMEOUT
    port = None
    while port is None:
        try:
            with open(port_file) as f:
                words = f.read().split()
            port = words[0] if words else None
        except FileNotFoundError:
            pass
        if port is None:
            if p.poll() is not None:
                sys.exit("chromium exited with status %d before listening" % p.returncode)
            if time.time() >= end:
                p.kill()
                sys.exit("chromium did not write %s in time" % port_file)
            time.sleep(0.05)
    tabs = json.load(urllib.request.urlopen("http://127.0.0.1:%s/json/list" % port))
    page = [t for t in tabs if t["type"] == "page"][0]
    return p, Page(WS(page["webSocketDebuggerUrl"]))


def main():
    url, steps = sys.argv[1], sys.argv[2:]
    profile = tempfile.mkdtemp(prefix="kiln-ui-browser.")
    proc, page = start_browser(profile)
    try:
        page.call("Page.enable")
        page.call("Page.navigate", url=url)
        for st in steps:
            kind, _, arg = st.partition(":")
            if kind == "wait":
                end = time.time() + TIMEOUT
                while not page.eval(arg):
                    if time.time() > end:
                        sys.stderr.write("ui_browser: timed out waiting for: %s\n"
                                         "the page showed:\n%s\n" %
                                         (arg, page.eval("document.body.innerText")))
                        return 1
                    time.sleep(0.1)
            elif kind == "click":
                if not page.eval("(() => { const e = document.querySelector(%s);"
                                 " if (!e) return false; e.click(); return true; })()"
                                 % json.dumps(arg)):
                    sys.stderr.write("ui_browser: nothing matches %s\n" % arg)
                    return 1
            elif kind == "run":
                if subprocess.call(arg, shell=True) != 0:
                    sys.stderr.write("ui_browser: failed: %s\n" % arg)
                    return 1
            elif kind == "shot":
                png = page.call("Page.captureScreenshot", format="png")["data"]
                with open(arg, "wb") as f:
                    f.write(base64.b64decode(png))
            elif kind == "print":
                print(json.dumps(page.eval(arg)))
            elif kind == "nav":
                page.call("Page.navigate", url=arg)
            elif kind == "nojs":
                page.call("Emulation.setScriptExecutionDisabled", value=True)
                page.call("Page.reload")
            else:
                sys.stderr.write("ui_browser: unknown step %s\n" % st)
                return 2
        return 0
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
