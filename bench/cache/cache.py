#!/usr/bin/env python3
"""bench/cache/cache.py BIN_DIR [-n STEPS] [-r RUNS]
— a build restored from the shared cache against the same build run
(issue 24's benchmark).

Generates the engine bench's project (bin/bench/bench_engine --gen-only, STEPS
steps, 10,000 by default: small `cp`-like tools and a final pack), starts a
real nginx (Debian's, dav module) on a free loopback port with its data in a
temporary folder, and then, RUNS times (3), in turns:

- "build": a fresh copy of the project with an empty store builds every
  step (no cache);
- "restore": a fresh copy with an empty store builds with the cache in mode
  read, after one machine in mode readwrite filled it (done once, before
  the runs, and waited for: kiln status's cache_pending 0, timed from the
  fill's start): every step is downloaded, no tool runs.

Each timed from the `kiln build` start to its exit (the daemon started by
it, as a user's first build on a new machine), -j 2. Prints the medians
and the ratio restore/build, and the restore's counters (steps
downloaded, bytes down) to show it really came from the cache.
"""
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def opt(args, name, default):
    return int(args[args.index(name) + 1]) if name in args else default


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def nginx_start(root):
    port = free_port()
    for d in ("data", "tmp", "logs"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    user = "user root;" if os.getuid() == 0 else ""
    conf = f"""daemon off;
worker_processes 1;
{user}
pid {root}/nginx.pid;
error_log {root}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log off;
  default_type application/octet-stream;
  client_body_temp_path {root}/tmp/body;
  proxy_temp_path {root}/tmp/proxy;
  fastcgi_temp_path {root}/tmp/fastcgi;
  uwsgi_temp_path {root}/tmp/uwsgi;
  scgi_temp_path {root}/tmp/scgi;
  server {{
    listen 127.0.0.1:{port};
    root {root}/data;
    client_max_body_size 0;
    location /kiln/ {{
      dav_methods PUT DELETE;
      create_full_put_path on;
      dav_access user:rw group:r all:r;
    }}
  }}
}}
"""
    with open(os.path.join(root, "nginx.conf"), "w") as f:
        f.write(conf)
    proc = subprocess.Popen(["/usr/sbin/nginx", "-p", root, "-e",
                             os.path.join(root, "logs/error.log"), "-c",
                             os.path.join(root, "nginx.conf")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, f"http://127.0.0.1:{port}/kiln/"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    sys.exit("nginx did not start (see %s/logs/error.log)" % root)


def status(kiln, proj, env):
    # (kiln status takes no -C yet: issue 27)
    out = subprocess.run([kiln, "status", "--json"], env=env, cwd=proj,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def build(kiln, src, scratch, env):
    """A fresh copy of src with an empty store, built once: (seconds, project)."""
    proj = tempfile.mkdtemp(dir=scratch)
    shutil.copytree(src, proj, dirs_exist_ok=True)
    t0 = time.monotonic()
    subprocess.run([kiln, "build", "-C", proj, "-j", "2"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.monotonic() - t0, proj


def stop(kiln, proj, env):
    subprocess.run([kiln, "stop"], env=env, cwd=proj, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    bindir = os.path.abspath(args[0])
    kiln = os.path.join(bindir, "kiln")
    steps = opt(args, "-n", 10000)
    runs = opt(args, "-r", 3)
    scratch = tempfile.mkdtemp(prefix="kiln-bench-cache.")
    try:
        gen = os.path.join(scratch, "gen")
        os.makedirs(gen)
        subprocess.run([os.path.join(bindir, "bench", "bench_engine"), "--kiln", kiln,
                        "-n", str(steps), "--gen-only", gen], check=True,
                       stdout=subprocess.DEVNULL)
        src = os.path.join(gen, "n%d-kiln" % steps)
        nginx, url = nginx_start(os.path.join(scratch, "srv"))
        try:
            plain = dict(os.environ, KILN_CACHE_MODE="off")
            plain.pop("KILN_CACHE_URL", None)
            write = dict(os.environ, KILN_CACHE_URL=url, KILN_CACHE_MODE="readwrite")
            read = dict(os.environ, KILN_CACHE_URL=url, KILN_CACHE_MODE="read")
            # one machine fills the cache
            t0 = time.monotonic()
            t, proj = build(kiln, src, scratch, write)
            deadline = time.monotonic() + 600
            while status(kiln, proj, write)["cache_pending"] > 0:
                if time.monotonic() > deadline:
                    sys.exit("the uploads did not end in 10 minutes")
                time.sleep(0.05)
            t_up = time.monotonic() - t0
            st = status(kiln, proj, write)
            print("fill (readwrite): the bench_engine -n %d project built in %.2f s, uploads over "
                  "%.2f s after its start; %d results uploaded, %d bytes up, %d dropped, %d errors" %
                  (steps, t, t_up, st["cache_uploaded"], st["cache_bytes_up"],
                   st["cache_dropped"], st["cache_errors"]))
            stop(kiln, proj, write)
            shutil.rmtree(proj)
            times = {"build": [], "restore": []}
            last = None
            for _ in range(runs):
                for kind, env in (("build", plain), ("restore", read)):
                    t, proj = build(kiln, src, scratch, env)
                    times[kind].append(t)
                    if kind == "restore":
                        last = status(kiln, proj, env)
                    stop(kiln, proj, env)
                    shutil.rmtree(proj)
            b = statistics.median(times["build"])
            r = statistics.median(times["restore"])
            print("bench_engine -n %d project, -j 2, empty store each run, %d runs each, in turns" % (steps, runs))
            print("build   (no cache)           median %7.2f s  runs %s" %
                  (b, " ".join("%.2f" % x for x in times["build"])))
            print("restore (shared cache, read) median %7.2f s  runs %s" %
                  (r, " ".join("%.2f" % x for x in times["restore"])))
            print("restore/build %.2f" % (r / b))
            print("last restore: %d steps downloaded, %d missed, %d bytes down, %d errors" %
                  (last["cache_hits"], last["cache_misses"], last["cache_bytes_down"],
                   last["cache_errors"]))
        finally:
            nginx.terminate()
            nginx.wait()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
