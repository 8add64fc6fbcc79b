#!/usr/bin/env python3
"""bench/live/live.py BIN_DIR [-n N] — edit-to-event latency of a live build.

N saves (an editor's: write a temp file, rename it over) of one source whose
step is a plain `cp`, each timed from the rename to the moment the watcher
says the result is there:
  kiln   examples/hot-reload (libkiln's kiln_live) prints "reload ..." for
         the step: the event arrives after the output was renamed into
         build/ (the daemon's watch, change report, build, event);
  ninja  the obvious peer: `inotifywait -m` on the source folder running
         `ninja` on the equivalent build.ninja, then printing a line;
(entr, in Debian, is left out: watching the one file, it never fired for
a save by rename here; watchexec is not in Debian 12.)
Each watcher's line is read from a pipe by this script; saves are 30 ms
apart so that runs do not overlap. Prints median and p99 per watcher and
the ratio of kiln's median to each peer's. Figures, not pass/fail.
"""
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def wait_line(proc, want, timeout=10.0):
    """Read proc's stdout until a line containing want; the time it came."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            raise RuntimeError("no %r within %.0f s from %r" % (want, timeout, proc.args))
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("watcher ended: %r" % proc.args)
        if want in line:
            return time.perf_counter_ns()


def saves(proj, proc, want, n):
    """n timed saves of src/a.txt; the latencies in ms."""
    src = os.path.join(proj, "src")
    out = []
    for i in range(n):
        tmp = os.path.join(src, ".a.txt.new")
        with open(tmp, "w") as f:
            f.write("save %d %d\n" % (i, time.time_ns()))
        t0 = time.perf_counter_ns()
        os.rename(tmp, os.path.join(src, "a.txt"))
        t1 = wait_line(proc, want)
        out.append((t1 - t0) / 1e6)
        time.sleep(0.03)
    return out


def project(root):
    os.makedirs(os.path.join(root, "src"))
    with open(os.path.join(root, "src", "a.txt"), "w") as f:
        f.write("first\n")
    with open(os.path.join(root, "kiln.yaml"), "w") as f:
        f.write("kiln: 1\nproject: live\nsources: [src]\nprofiles:\n  pc: {}\n"
                "tools:\n  copy: { run: [cp, \"${in}\", \"${out}\"] }\n"
                "assets:\n  - url: a.txt\n    tool: copy\n    inputs: [src/a.txt]\n")
    with open(os.path.join(root, "build.ninja"), "w") as f:
        f.write("rule cp\n  command = cp $in $out\n"
                "build build/pc/a.txt: cp src/a.txt\n")


def report(name, ms):
    ms = sorted(ms)
    med = statistics.median(ms)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print("%-6s %4d saves  median %7.2f ms  p99 %7.2f ms  min %6.2f  max %7.2f"
          % (name, len(ms), med, p99, ms[0], ms[-1]))
    return med


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    bindir = os.path.abspath(args[0])
    n = int(args[args.index("-n") + 1]) if "-n" in args else 200
    kiln = os.path.join(bindir, "kiln")
    hot = os.path.join(bindir, "examples", "hot-reload")
    for exe in (kiln, hot):
        if not os.access(exe, os.X_OK):
            sys.exit("live.py: %s is not built (make %s)" % (exe, exe))
    base = tempfile.mkdtemp(prefix="kiln-live-", dir=os.environ.get("KILN_BENCH_DIR"))
    meds = {}
    try:
        proj = os.path.join(base, "kiln")
        project(proj)
        subprocess.run([kiln, "status"], cwd=proj, check=True, stdout=subprocess.DEVNULL)
        p = subprocess.Popen([hot], cwd=proj, stdout=subprocess.PIPE, text=True, bufsize=1)
        try:
            wait_line(p, "reload a.txt")
            meds["kiln"] = report("kiln", saves(proj, p, "reload a.txt", n))
        finally:
            p.terminate()
            p.wait()
            subprocess.run([kiln, "stop"], cwd=proj, stdout=subprocess.DEVNULL)

        peers = []
        if shutil.which("inotifywait") and shutil.which("ninja"):
            peers.append(("ninja", "inotifywait -q -m -e moved_to src | "
                          "while read -r _; do ninja >/dev/null; echo built; done"))
        for name, cmd in peers:
            proj = os.path.join(base, name)
            project(proj)
            subprocess.run(["ninja"], cwd=proj, check=True,
                           stdout=subprocess.DEVNULL)
            p = subprocess.Popen(["sh", "-c", cmd], cwd=proj, stdout=subprocess.PIPE,
                                 text=True, bufsize=1, start_new_session=True)
            try:
                time.sleep(0.5)  # the watcher is set up (no sign of it)
                meds[name] = report(name, saves(proj, p, "built", n))
            finally:
                os.killpg(p.pid, 15)
                p.wait()
        for name in meds:
            if name != "kiln":
                print("kiln/%s median ratio %.2f" % (name, meds["kiln"] / meds[name]))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
