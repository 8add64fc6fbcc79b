#!/usr/bin/env python3
"""sp_peer.py: one long-lived req0 connection to kilnd's tcp:// listener,
speaking nng's SP framing by hand, for tests that need several requests on
the SAME connection (nngcat sends each request on a new one). Requests are
written in protobuf text format and encoded with protoc, replies decoded
with it (no protobuf module needed).

  sp_peer.py agent PORT TOKEN NAME OUT
      say hello as agent NAME (1 slot), take until a job comes, write
      "AGENT LEASE OUTPUT" to OUT, then keep the lease (heartbeats) until
      killed.
  sp_peer.py answer PORT TOKEN NAME REQUEST
      say hello as agent NAME, then send REQUEST (text format) on the
      same connection and print the reply.
  sp_peer.py hold-uploads PORT TOKEN N OUT
      open N uploads (3 bytes each, never committed) one after the other
      on one connection, write how many the daemon accepted to OUT, and
      hold them until killed.
"""
import os
import re
import socket
import struct
import subprocess
import sys
import time

TOP = os.environ["KILN_TOP"]


def encode(text):
    return subprocess.run(
        ["protoc", "--proto_path=" + TOP + "/proto", "--encode=kiln.Request",
         "kiln.proto"], input=text.encode(), stdout=subprocess.PIPE,
        check=True).stdout


def decode(data):
    return subprocess.run(
        ["protoc", "--proto_path=" + TOP + "/proto", "--decode=kiln.Reply",
         "kiln.proto"], input=data, stdout=subprocess.PIPE,
        check=True).stdout.decode()


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        k = s.recv(n - len(b))
        if not k:
            raise EOFError("the daemon closed the connection")
        b += k
    return b


class Peer:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.sendall(b"\x00SP\x00\x00\x30\x00\x00")   # req0
        recv_exact(self.s, 8)
        self.rid = 0x80000001

    def call_raw(self, req):
        body = struct.pack(">I", self.rid) + req
        self.rid += 1
        self.s.sendall(struct.pack(">Q", len(body)) + body)
        n = struct.unpack(">Q", recv_exact(self.s, 8))[0]
        return recv_exact(self.s, n)[4:]

    def call(self, text):
        return decode(self.call_raw(encode(text)))


def varint(b, i):
    v = shift = 0
    while True:
        v |= (b[i] & 0x7f) << shift
        shift += 7
        i += 1
        if not b[i - 1] & 0x80:
            return v, i


def status_of(reply):
    """Reply.status (field 2) without protoc: 0 (OK) when absent."""
    i = 0
    while i < len(reply):
        key, i = varint(reply, i)
        kind = key & 7
        if kind == 0:
            v, i = varint(reply, i)
            if key >> 3 == 2:
                return v
        elif kind == 2:
            n, i = varint(reply, i)
            i += n
        elif kind == 1:
            i += 8
        elif kind == 5:
            i += 4
        else:
            raise ValueError("bad reply")
    return 0


def field(text, name):
    m = re.search(r"\b" + name + r": (\S+)", text)
    return m.group(1).strip('"') if m else None


def agent(port, token, name, out):
    p = Peer(port)
    env = 'version: 1 token: "%s" ' % token
    r = p.call(env + 'agent_hello { name: "%s" slots: 1 cores: 1 }' % name)
    ident = field(r, "agent")
    if ident is None:
        sys.exit("hello refused: " + r)
    while True:
        r = p.call(env + "agent_take { agent: %s free: 1 wait_ms: 300 }" % ident)
        lease = field(r, "lease")
        if lease is not None:
            break
    with open(out + ".tmp", "w") as f:
        f.write("%s %s %s\n" % (ident, lease, field(r, "outputs")))
    os.rename(out + ".tmp", out)
    while True:   # the heartbeat keeps the lease ours
        p.call(env + "agent_take { agent: %s free: 0 running: %s }" % (ident, lease))
        time.sleep(0.2)


def answer(port, token, name, text):
    p = Peer(port)
    r = p.call('version: 1 token: "%s" agent_hello { name: "%s" slots: 1 }'
               % (token, name))
    if field(r, "agent") is None:
        sys.exit("hello refused: " + r)
    print(p.call(text))


def hold_uploads(port, token, n, out):
    p = Peer(port)
    ok = 0
    req = encode('version: 1 token: "%s" blob_put {} data: "abc"' % token)
    for _ in range(n):
        ok += status_of(p.call_raw(req)) == 0
    with open(out + ".tmp", "w") as f:
        f.write("%d\n" % ok)
    os.rename(out + ".tmp", out)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "agent":
        agent(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
    elif cmd == "answer":
        answer(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
    elif cmd == "hold-uploads":
        hold_uploads(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit("usage: sp_peer.py agent|answer|hold-uploads ...")
