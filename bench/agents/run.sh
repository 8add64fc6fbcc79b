#!/bin/sh
# bench/agents/run.sh BIN_DIR — what build agents cost (issue 25), against
# a real kilnd listening on tcp:// loopback, each figure beside a peer
# measured in the same run:
#
#   1. per-step overhead of a remote step: a project of N independent `cp`
#      steps of small files, built with a fresh store by the daemon alone
#      (`kiln build -j 1`) and by one real agent (`kilnd --local-jobs 0`,
#      `kiln agent -j 1`, a fresh cache), in turns; ms per step, medians;
#      and what the requests a remote step is made of cost on this daemon
#      (bench_agents rtt: status, put and get of a small blob);
#   2. dispatch rate: AGENTSxSLOTS simulated agents (bench_agents dispatch:
#      the real protocol, no tools: every job answered at once with one
#      uploaded blob as every output) against `kilnd --local-jobs 0`
#      building a generated project of M steps; steps per second and the
#      daemon's CPU time per step, against the same project built by the
#      daemon alone running its `cp` tools (`-j 2`); target >= 5,000/s;
#   3. blob transfer: a 256 MiB kiln_blob_put and kiln_blob_get over
#      tcp:// loopback against a bare nng req/rep pair (1 MiB messages).
#
# `make bench` calls it as `bench/agents/run.sh bin`; ~1-2 minutes on the
# project's 2-core machine. Not part of `make test`. Sizes (environment):
#   KILN_BENCH_AGENTS_STEPS [200]      N of part 1
#   KILN_BENCH_AGENTS_DISPATCH [5000]  M of part 2
#   KILN_BENCH_AGENTS_SIM [100x4]      simulated agents x slots (a list:
#                                      "10x4 100x4")
#   KILN_BENCH_RUNS [5]                runs of each build (medians)
#   KILN_BENCH_BLOB_MIB [256]          part 3's blob
#   KILN_BENCH_BLOB_REPS [5]           part 3's timed transfers (medians)
# Everything goes to a fresh folder under ${TMPDIR:-/tmp}, removed at the
# end after every daemon and agent started here is stopped.
set -eu

if [ $# -ne 1 ]; then
	echo "usage: bench/agents/run.sh BIN_DIR" >&2
	exit 2
fi
bin=$(cd "$1" && pwd)
exe=$bin/bench/bench_agents
for f in "$exe" "$bin/kiln" "$bin/kilnd"; do
	if [ ! -x "$f" ]; then
		echo "run.sh: $f is not built (make $f)" >&2
		exit 2
	fi
done
steps=${KILN_BENCH_AGENTS_STEPS:-200}
dsteps=${KILN_BENCH_AGENTS_DISPATCH:-5000}
sims=${KILN_BENCH_AGENTS_SIM:-100x4}
runs=${KILN_BENCH_RUNS:-5}
mib=${KILN_BENCH_BLOB_MIB:-256}
reps=${KILN_BENCH_BLOB_REPS:-5}

# A short path: kilnd's socket lives in <project>/.kiln/ (107 bytes at most).
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kiln-bench-agents.XXXXXX")
agent_pid=
cleanup() {
	if [ -n "$agent_pid" ]; then
		kill "$agent_pid" 2>/dev/null || true
		wait "$agent_pid" 2>/dev/null || true
	fi
	for pidfile in "$scratch"/*/.kiln/kilnd.pid; do
		[ -f "$pidfile" ] || continue
		pid=$(cat "$pidfile" 2>/dev/null || true)
		if [ -n "$pid" ] && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = kilnd ]; then
			kill "$pid" 2>/dev/null || true
		fi
	done
	rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' HUP INT PIPE TERM
# never a repository's root: kiln finds its project upward from here
cd "$scratch"
# the agents' token (agent requests, blob puts, their inputs' gets), and
# the admin's for the requests timed by hand (status, put, get any blob)
head -c 24 /dev/urandom | base64 | tr -d '\n/+=' >token
echo >>token
head -c 24 /dev/urandom | base64 | tr -d '\n/+=' >admin.token
echo >>admin.token

ms() { echo $(($(date +%s%N) / 1000000)); }
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
# the figures of one key=value line
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

# stop DIR: the project's daemon, waiting until it is gone
stop() { (cd "$1" && "$bin/kiln" stop >/dev/null 2>&1) || true; }

# build DIR JOBS: a full build, timed (ms on stdout); it must run every step
build() {
	t0=$(ms)
	"$bin/kiln" build -C "$1" -j "$2" >"$1.out" 2>&1 ||
		{ echo "run.sh: kiln build in $1 failed:" >&2; tail -5 "$1.out" >&2; exit 1; }
	t1=$(ms)
	grep -q " $3 ran, 0 up to date" "$1.out" ||
		{ echo "run.sh: $1 did not run its $3 steps:" >&2; tail -2 "$1.out" >&2; exit 1; }
	echo $((t1 - t0))
}

# remote_up DIR: kilnd for DIR on a free loopback port, every tool on agents
remote_up() {
	url=tcp://127.0.0.1:$("$exe" port)
	"$bin/kilnd" --project "$1" --listen "$url" --agent-token-file token \
		--admin-token-file admin.token --local-jobs 0
}

echo "bench/agents: $(nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)"

# ---- 1. a remote step against a local one ----------------------------------
"$exe" gen gen1 "$steps"
: >local.ms
: >remote.ms
for r in $(seq 1 "$runs"); do
	cp -a gen1 "l$r"
	"$bin/kilnd" --project "l$r"
	build "l$r" 1 "$steps" >>local.ms
	stop "l$r"

	cp -a gen1 "r$r"
	remote_up "r$r"
	"$bin/kiln" agent --connect "$url" --token-file token --cache "$scratch/cache$r" \
		-j 1 --name bench >"agent$r.log" 2>&1 &
	agent_pid=$!
	for _ in $(seq 1 200); do
		(cd "r$r" && "$bin/kiln" status 2>/dev/null) | grep -q "bench: " && break
		sleep 0.05
	done
	build "r$r" 1 "$steps" >>remote.ms
	kill "$agent_pid"
	wait "$agent_pid" || true
	agent_pid=
	stop "r$r"
	rm -rf "l$r" "r$r" "cache$r"
done
lm=$(median <local.ms)
rm_=$(median <remote.ms)
echo
echo "1. $steps independent cp steps, full build, fresh store, -j 1, median of $runs (runs in ms: local $(tr '\n' ' ' <local.ms)| agent $(tr '\n' ' ' <remote.ms))"
awk -v l="$lm" -v r="$rm_" -v n="$steps" 'BEGIN {
	printf "  daemon alone (kiln build -j 1)              %6.2f ms/step\n", l / n
	printf "  one agent (--local-jobs 0, kiln agent -j 1) %6.2f ms/step\n", r / n
	printf "  remote - local %.2f ms/step (round trips, fetch, upload); agent/local %.2f\n", (r - l) / n, r / l
}'

mkdir rtt
: >rtt/kiln.yaml
remote_up rtt
line=$("$exe" rtt "$url" admin.token 50)
stop rtt
echo "$line" | awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
	printf "  one request on this daemon over tcp (median of 50): status %d us, put of a new small blob %d us, get %d us\n", v["status_us"], v["put_us"], v["get_us"]
	printf "  (an agent makes, per step: a take, a get per input not cached, a put per output and of its trace, a done)\n" }'

# ---- 2. dispatch to simulated agents ----------------------------------------
"$exe" gen gen2 "$dsteps"
: >dlocal.ms
for sim in $sims; do
	: >"d$sim.txt"
done
for r in $(seq 1 "$runs"); do
	for sim in $sims; do
		cp -a gen2 "d$r"
		remote_up "d$r"
		"$exe" dispatch "$url" token "$scratch/d$r" "$bin/kiln" "${sim%x*}" "${sim#*x}" \
			>>"d$sim.txt"
		stop "d$r"
		rm -rf "d$r" "d$r.out"
	done
	cp -a gen2 "dl$r"
	"$bin/kilnd" --project "dl$r"
	build "dl$r" 2 "$dsteps" >>dlocal.ms
	stop "dl$r"
	rm -rf "dl$r"
done
dl=$(median <dlocal.ms)
echo
echo "2. dispatch: $dsteps steps, kilnd --local-jobs 0, simulated agents answering at once (no tools), median of $runs"
awk -v l="$dl" -v n="$dsteps" 'BEGIN {
	printf "  daemon alone running cp, -j 2            %7.0f steps/s\n", n * 1000 / l }'
for sim in $sims; do
	rate=$(field steps_per_s <"d$sim.txt" | median)
	cpu=$(field daemon_cpu_us_per_step <"d$sim.txt" | median)
	acpu=$(field agents_cpu_s <"d$sim.txt" | median)
	awk -v s="$sim" -v x="$rate" -v c="$cpu" -v a="$acpu" -v l="$dl" -v n="$dsteps" 'BEGIN {
		printf "  %-7s agents x slots, no-op           %7.0f steps/s (runs:", s, x }'
	printf ' %s' $(field steps_per_s <"d$sim.txt")
	awk -v s="$sim" -v x="$rate" -v c="$cpu" -v a="$acpu" -v l="$dl" -v n="$dsteps" 'BEGIN {
		printf ")\n    daemon CPU %.0f us/step (so at most %.0f steps/s per daemon core); the simulated agents %.2f s CPU\n", c, 1e6 / c, a
		printf "    agents/daemon-alone %.2f; of the target 5,000 steps/s: %.2f\n", x * l / (n * 1000), x / 5000 }'
done

# ---- 3. blob transfer ---------------------------------------------------------
mkdir blobs
: >blobs/kiln.yaml
remote_up blobs
echo
echo "3. $("$exe" blobs "$url" admin.token "$mib" "$reps")"
stop blobs
