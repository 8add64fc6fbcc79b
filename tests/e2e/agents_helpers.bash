# agents_helpers.bash — what the agents' end-to-end suites share
# (agents.bats, agents_project.bats): a real kilnd listening on tcp://
# loopback with an agent token, and real `kiln agent` processes, each in a
# folder of its own under the case's temp dir, with no copy of the project.

load daemon_helpers
eval "$(declare -f teardown | sed '1s/teardown/daemon_teardown/')"

teardown() {
	local pid
	for pid in ${AGENT_PIDS:-}; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in ${AGENT_PIDS:-}; do
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
		kill -9 "$pid" 2>/dev/null || true
	done
	for f in "$BATS_TEST_TMPDIR"/agent*.log; do
		if [ -f "$f" ] && grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$f"; then
			echo "sanitizer report in $f:"
			cat "$f"
			return 1
		fi
	done
	if declare -F nginx_stop >/dev/null; then nginx_stop; fi
	daemon_teardown
}

# daemon_up [ARGS...]: kilnd on a free loopback port with a token,
# every tool on agents (--local-jobs 0) unless ARGS say otherwise.
daemon_up() {
	free_port
	URL="tcp://127.0.0.1:$port"
	head -c 24 /dev/urandom | base64 | tr -d '\n/+=' | head -c 32 >"$BATS_TEST_TMPDIR/token"
	echo >>"$BATS_TEST_TMPDIR/token"
	head -c 24 /dev/urandom | base64 | tr -d '\n/+=' | head -c 32 >"$BATS_TEST_TMPDIR/client-token"
	echo >>"$BATS_TEST_TMPDIR/client-token"
	"$KILND" --project . --listen "$URL" --agent-token-file "$BATS_TEST_TMPDIR/token" \
		--token-file "$BATS_TEST_TMPDIR/client-token" --agent-lease 1000 "$@"
}

# agent_up NAME [ARGS...]: an agent with its own cache, outside the
# project, started in the background; waits until the daemon lists it.
agent_up() {
	local name=$1
	shift
	mkdir -p "$BATS_TEST_TMPDIR/$name"
	(cd "$BATS_TEST_TMPDIR/$name" && exec "$KILN" agent --connect "$URL" \
		--token-file "$BATS_TEST_TMPDIR/token" --cache "$BATS_TEST_TMPDIR/$name/cache" \
		--name "$name" "$@" >"$BATS_TEST_TMPDIR/agent-$name.log" 2>&1) &
	AGENT_PIDS="${AGENT_PIDS:-} $!"
	LAST_AGENT=$!
	wait_for agent_listed "$name"
}

agent_listed() {
	"$KILN" status | grep -q "$1: "
}
