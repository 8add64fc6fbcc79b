#!/usr/bin/env python3
"""bench/live/interactive.py BIN_DIR [-n STEPS] [-j JOBS] [-r REQUESTS]
                                    [--batch-sleep MS]
— how soon an interactive request starts while a full build runs (issue 23).

A generated project of STEPS (10,000) independent batch steps, each `cp` of
its own source (--batch-sleep MS: a shell tool that sleeps MS ms, then
copies), all packed into all.txt at the end, and 3 x REQUESTS (3 x 20)
interactive targets whose URLs sort last and whose critical path is no
longer than the batch's, so that the full build would run them last: z/sNN.txt, one step, and z/cNN.txt, a step whose
prerequisite z/cNN.pre is unbuilt too, and z/iNN.txt (below). The
targets' tool is bash, which
appends the URL and $EPOCHREALTIME to a file outside the project when it
starts, then copies (tracing off: it writes outside its scratch folder).

`kiln build -j JOBS` (full) starts; every 0.15 s while it runs, this script
asks `kiln build -j JOBS --priority 100 TARGET` (a kiln watch's priority),
alternating single and chained targets, and times from just before it
starts the client to the target's tool start (from the file) and to the
client's exit. The full build's queue (kiln status's build_queue) is
noted before each request; a request whose steps the full build had
started already (near its end) is not a sample. A cancelled full build (--batch-sleep: the
rest would take minutes) ends when the requests are done.

Prints median and p99 of request->start and request->done: first with no
build running (z/iNN.txt, asked before the full build: what asking costs
anyway; and a built target, no tool), then during the full build per
kind, and for a built target during it; and the batch tool's own run time (the full build's step
durations). The issue's target: a request starts within one tool's run
time of being asked, i.e. ->start during the full build minus ->start on
an idle daemon is at most the batch tool's run time. Figures, not
pass/fail.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

STAMP = ('printf "%s %s\\n" "$KILN_URL" "$EPOCHREALTIME" >>"$STAMPS"; '
         'cp "$1" "$2"')


def opt(args, name, default, kind=int):
    return kind(args[args.index(name) + 1]) if name in args else default


def project(root, steps, requests, sleep_ms, stamps):
    """Write the project: sources, kiln.yaml."""
    os.makedirs(os.path.join(root, "src", "b"))
    os.makedirs(os.path.join(root, "src", "z"))
    for i in range(steps):
        with open(os.path.join(root, "src", "b", "%05d.txt" % i), "w") as f:
            f.write("batch %d\n" % i)
    for i in range(requests):
        for k in "sci":
            with open(os.path.join(root, "src", "z", "%s%02d.txt" % (k, i)), "w") as f:
                f.write("target %s %d\n" % (k, i))
    batch = ('{ run: [cp, "${in}", "${out}"] }' if sleep_ms is None else
             '{ shell: true, run: "sleep %.3f; cp ${in} ${out}" }' % (sleep_ms / 1000))
    y = ["kiln: 1", "project: interactive", "sources: [src]",
         "profiles:", "  pc: {}", "tools:", "  batch: " + batch,
         "  pack: { shell: true, run: \"cat ${in...} >${out}\" }",
         "  stamp:", "    trace: false",
         "    run: [bash, -c, '%s', stamp, \"${in}\", \"${out}\"]" % STAMP,
         "    env: { STAMPS: \"%s\" }" % stamps,
         "rules:",
         "  - { match: \"src/b/*.txt\", url: \"b/${match.name}.txt\", tool: batch }",
         "  - { match: \"src/z/s*.txt\", url: \"z/${match.name}.txt\", tool: stamp }",
         "  - { match: \"src/z/c*.txt\", url: \"z/${match.name}.pre\", tool: stamp }",
         "  - { match: \"src/z/i*.txt\", url: \"z/${match.name}.txt\", tool: stamp }",
         "assets:"]
    # every batch step two from an end, as long as a chain's first step
    y.append("  - url: all.txt\n    tool: pack\n    inputs: [%s]"
             % ", ".join('"@b/%05d.txt"' % i for i in range(steps)))
    for i in range(requests):
        y.append("  - { url: z/c%02d.txt, tool: stamp, inputs: [\"@z/c%02d.pre\"] }" % (i, i))
    with open(os.path.join(root, "kiln.yaml"), "w") as f:
        f.write("\n".join(y) + "\n")


def stamps_of(path):
    out = {}
    with open(path) as f:
        for line in f:
            url, t = line.split()
            out[url] = int(t.replace(".", "")) * 1000  # us -> ns
    return out


def pct(ms, q):
    ms = sorted(ms)
    return ms[min(len(ms) - 1, int(len(ms) * q))]


def report(name, ms):
    if not ms:
        print("%-36s no samples" % name)
        return
    print("%-36s %4d  median %8.2f ms  p99 %8.2f ms  min %7.2f  max %8.2f"
          % (name, len(ms), statistics.median(ms), pct(ms, 0.99), min(ms), max(ms)))


def durations(path):
    """The batch steps' durations (ms) in a kiln build --json output."""
    ms = []
    with open(path) as f:
        for line in f:
            if '"event":"step"' in line and '"result":"ran"' in line:
                ev = json.loads(line)
                if ev["url"].startswith("b/"):
                    ms.append(ev["duration_ms"])
    return ms


def status_queue(kiln, proj):
    r = subprocess.run([kiln, "status", "--json"], cwd=proj, capture_output=True, text=True)
    try:
        return json.loads(r.stdout)["build_queue"]
    except (ValueError, KeyError):
        return -1


def idle(kiln, proj, jobs, requests):
    """Requests for z/iNN.txt, one step each, with no build running."""
    out = []
    for i in range(requests):
        url = "z/i%02d.txt" % i
        t0 = time.time_ns()
        subprocess.run([kiln, "build", "-j", str(jobs), "--priority", "100", url],
                       cwd=proj, stdout=subprocess.DEVNULL, check=True)
        out.append((url, t0, time.time_ns()))
    floor = []
    for url, _, _ in out:  # again, built now: no tool
        t0 = time.time_ns()
        subprocess.run([kiln, "build", "-j", str(jobs), "--priority", "100", url],
                       cwd=proj, stdout=subprocess.DEVNULL, check=True)
        floor.append((time.time_ns() - t0) / 1e6)
    return out, floor


def run(kiln, proj, jobs, requests, stamps):
    """The full build and the requests; the samples."""
    full_out = os.path.join(proj, "..", "full.json")
    full = subprocess.Popen([kiln, "build", "-j", str(jobs), "--json"], cwd=proj,
                            stdout=open(full_out, "w"), stderr=subprocess.STDOUT)
    res = {"single": [], "chain": [], "queue": [], "floor": []}
    time.sleep(0.5)
    todo = [("s", i) for i in range(requests)] + [("c", i) for i in range(requests)]
    todo.sort(key=lambda x: (x[1], x[0]))
    for k, i in todo:
        if full.poll() is not None:
            break
        res["queue"].append(status_queue(kiln, proj))
        url = "z/%s%02d.txt" % (k, i)
        t0 = time.time_ns()
        r = subprocess.run([kiln, "build", "-j", str(jobs), "--priority", "100", url],
                           cwd=proj, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        t1 = time.time_ns()
        if r.returncode != 0:
            raise RuntimeError("kiln build %s: %s" % (url, r.stderr.decode()))
        if full.poll() is not None:
            break  # the full build ended meanwhile: not a sample
        first = url[:-4] + ".pre" if k == "c" else url
        if stamps_of(stamps).get(first, t0) < t0:
            continue  # the full build got there first: not a sample
        res["single" if k == "s" else "chain"].append((url, t0, t1))
        # the floor: the same target again, now built (no tool)
        t0 = time.time_ns()
        subprocess.run([kiln, "build", "-j", str(jobs), "--priority", "100", url],
                       cwd=proj, stdout=subprocess.DEVNULL, check=True)
        res["floor"].append((time.time_ns() - t0) / 1e6)
        time.sleep(0.15)
    if full.poll() is None:
        full.send_signal(2)  # what is left of it is not measured
    full.wait()
    return res, durations(full_out)


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    bindir = os.path.abspath(args[0])
    steps = opt(args, "-n", 10000)
    jobs = opt(args, "-j", 2)
    requests = opt(args, "-r", 20)
    sleep_ms = opt(args, "--batch-sleep", None, float)
    kiln = os.path.join(bindir, "kiln")
    if not os.access(kiln, os.X_OK):
        sys.exit("interactive.py: %s is not built (make %s)" % (kiln, kiln))
    base = tempfile.mkdtemp(prefix="kiln-int-", dir=os.environ.get("KILN_BENCH_DIR"))
    proj = os.path.join(base, "p")
    stamps = os.path.join(base, "stamps")
    try:
        project(proj, steps, requests, sleep_ms, stamps)
        subprocess.run([kiln, "status"], cwd=proj, check=True, stdout=subprocess.DEVNULL)
        quiet, quiet_floor = idle(kiln, proj, jobs, requests)
        res, batch_ms = run(kiln, proj, jobs, requests, stamps)
        st = stamps_of(stamps)
        report("idle daemon, one step: ->start", [(st[u] - t0) / 1e6 for u, t0, _ in quiet])
        report("idle daemon, one step: ->done", [(t1 - t0) / 1e6 for _, t0, t1 in quiet])
        report("idle, a built target: ->done", quiet_floor)
        print("%d batch steps (%s), -j %d, %d requests at priority 100 while it ran "
              "(queue at each: median %d steps)"
              % (steps, "cp" if sleep_ms is None else "sleep %g ms + cp" % sleep_ms, jobs,
                 len(res["single"]) + len(res["chain"]),
                 statistics.median(res["queue"]) if res["queue"] else 0))
        for kind in ("single", "chain"):
            start = [(st[u] - t0) / 1e6 for u, t0, _ in res[kind] if u in st]
            done = [(t1 - t0) / 1e6 for _, t0, t1 in res[kind]]
            label = "one step" if kind == "single" else "after its prerequisite"
            report("%s: ->start" % label, start)
            report("%s: ->done" % label, done)
            if kind == "chain":
                pre = [(st[u[:-4] + ".pre"] - t0) / 1e6 for u, t0, _ in res[kind]
                       if u[:-4] + ".pre" in st]
                report("its prerequisite: ->start", pre)
        report("a built target (no tool): ->done", res["floor"])
        report("batch tool run (target)", batch_ms)
    finally:
        subprocess.run([kiln, "stop"], cwd=proj, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
