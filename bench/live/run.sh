#!/bin/sh
# bench/live/run.sh BIN_DIR [-n N] — the live builds' latencies:
#  - live.py: edit-to-event latency of kiln's live builds against
#    inotifywait + ninja (-n N saves; live.py says how); needs the
#    hot-reload example (make bin/examples/hot-reload), inotify-tools and
#    ninja-build;
#  - interactive.py: how soon an interactive request (priority 100, a kiln
#    watch's) starts while a 10,000-step full build runs at -j 2, with a
#    `cp` batch tool and with one that sleeps 50 ms (interactive.py says
#    how; about 40 s in all). Run alone for other sizes:
#    bench/live/interactive.py BIN_DIR [-n STEPS] [-j JOBS] [-r REQUESTS]
#    [--batch-sleep MS].
# `make bench` calls it as `bench/live/run.sh bin`.
set -eu
if [ $# -lt 1 ]; then
	echo "usage: bench/live/run.sh BIN_DIR [-n N]" >&2
	exit 2
fi
here=$(dirname "$0")
python3 -u "$here/live.py" "$@"
python3 -u "$here/interactive.py" "$1"
python3 -u "$here/interactive.py" "$1" --batch-sleep 50
