#!/bin/sh
# bench/live/run.sh BIN_DIR [-n N] — edit-to-event latency of kiln's live
# builds against inotifywait + ninja (bench/live/live.py says how).
# `make bench` calls it as `bench/live/run.sh bin`; needs the hot-reload
# example (make bin/examples/hot-reload), inotify-tools and ninja-build.
set -eu
if [ $# -lt 1 ]; then
	echo "usage: bench/live/run.sh BIN_DIR [-n N]" >&2
	exit 2
fi
exec python3 -u "$(dirname "$0")/live.py" "$@"
