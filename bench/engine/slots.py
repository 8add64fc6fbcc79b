#!/usr/bin/env python3
"""bench/engine/slots.py SPAWNER — how busy a build kept its -j slots.

Reads `perf script` output of the scheduler's process events on stdin and
looks at the processes forked by threads named SPAWNER (kilnd, make,
ninja, bench_engine) that exec'ed: per tool the time from fork to exec
and from fork to exit, how many were alive on average against -j
(--jobs, default 2), and the gap between a tool's exit and the next fork
(the slot standing idle). Record with, for example:

  perf record -e sched:sched_process_fork,sched:sched_process_exec,\\
      sched:sched_process_exit -a -o sched.data -- sleep 5 &
  kiln build -j2; wait
  perf script -i sched.data | bench/engine/slots.py kilnd
"""
import argparse
import bisect
import re
import statistics
import sys

LINE = re.compile(r'\s*(\S+)\s+(\d+)\s+\[\d+\]\s+([\d.]+): sched:(\w+): (.*)')


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('spawner')
    ap.add_argument('--jobs', type=int, default=2)
    a = ap.parse_args()
    events = []
    for line in sys.stdin:
        m = LINE.match(line)
        if m:
            comm, pid, t, kind, rest = m.groups()
            events.append((float(t), comm, int(pid), kind, rest))
    forks, execs, exits = {}, {}, {}
    for t, comm, pid, kind, rest in events:
        if kind == 'sched_process_fork' and comm == a.spawner[:15]:
            forks[int(re.search(r'child_pid=(\d+)', rest).group(1))] = t
    for t, comm, pid, kind, rest in events:
        if kind == 'sched_process_exec' and pid in forks and pid not in execs:
            execs[pid] = t
        elif (kind == 'sched_process_exit' and pid in execs
              and 'group_dead=true' in rest):
            exits[pid] = t
    tools = [p for p in exits]
    if not tools:
        sys.exit(f'slots.py: no process forked by {a.spawner} exec\'ed and exited')
    ms = lambda x: x * 1e3
    first = min(forks[p] for p in tools)
    last = max(exits[p] for p in tools)
    alive, n, prev = 0.0, 0, first
    for t, d in sorted([(forks[p], 1) for p in tools] + [(exits[p], -1) for p in tools]):
        alive += n * (t - prev)
        n += d
        prev = t
    fork_times = sorted(forks[p] for p in tools)
    gaps = []
    for p in tools:
        i = bisect.bisect_right(fork_times, exits[p])
        if i < len(fork_times):
            gaps.append(ms(fork_times[i] - exits[p]))
    gaps.sort()
    q = lambda f: gaps[min(len(gaps) - 1, int(f * len(gaps)))]
    print(f'{a.spawner}: {len(tools)} tools in {ms(last - first):.0f} ms '
          f'(first fork to last exit); slots busy {alive / ((last - first) * a.jobs):.3f}')
    print(f'  fork->exec median {statistics.median(ms(execs[p] - forks[p]) for p in tools):.3f} ms, '
          f'fork->exit median {statistics.median(ms(exits[p] - forks[p]) for p in tools):.3f} ms')
    if gaps:
        print(f'  exit->next fork: p50 {q(.5):.3f} p90 {q(.9):.3f} p99 {q(.99):.3f} ms, '
              f'{sum(1 for g in gaps if g > 1)} over 1 ms ({sum(g for g in gaps if g > 1):.0f} ms)')


if __name__ == '__main__':
    main()
