# daemon_helpers.bash — what the daemon's end-to-end tests share: a fresh
# project folder per case, stopping its daemon afterwards, raw requests over
# the socket with nngcat (decoded with protoc, independently of kiln's own
# code), and reading a process's memory.

setup() {
	[ -x "${KILN:-}" ] || { echo "KILN='${KILN:-}' is not an executable" >&2; return 1; }
	[ -x "${KILND:-}" ] || { echo "KILND='${KILND:-}' is not an executable" >&2; return 1; }
	mkdir -p "$BATS_TEST_TMPDIR/p"
	cd "$BATS_TEST_TMPDIR/p"
	: >kiln.yaml
	P=$(pwd -P)
}

teardown() {
	local pid
	if [ -f .kiln/kilnd.pid ]; then
		pid=$(cat .kiln/kilnd.pid)
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 1 100); do running "$pid" || break; sleep 0.05; done
		kill -9 "$pid" 2>/dev/null || true
	fi
	for f in .kiln/kilnd.log fg.log; do
		if [ -f "$f" ] && grep -qE 'AddressSanitizer|LeakSanitizer|runtime error' "$f"; then
			echo "sanitizer report in $f:"
			cat "$f"
			return 1
		fi
	done
	return 0
}

# running PID: the process exists and has not exited. A daemonized
# kilnd that exited stays a zombie until PID 1 reaps it (1.7 s on a
# machine whose PID 1 reaps slowly), and kill -0 still finds a zombie;
# by then it has written its log and closed its files.
running() {
	local st
	st=$(sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

# free_port [SALT]: set $port to a TCP port that looks free: below the
# kernel's ephemeral range (ip_local_port_range, 32768 and up by default),
# where the suite's own connections take theirs (a random port in
# 20000-50000 was twice already taken: "Address in use"), and not shown
# in use by ss.
free_port() {
	local lo
	lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
	[ "$lo" -gt 12000 ] 2>/dev/null || lo=32768
	port=$((10000 + (RANDOM * 7 + BATS_TEST_NUMBER * 131 + ${1:-0}) % (lo - 10000)))
	while [ -n "$(ss -Htan "sport = :$port" 2>/dev/null)" ]; do
		port=$((port + 1))
	done
}

# daemon_pid: the pid in the project's pid file.
daemon_pid() {
	cat .kiln/kilnd.pid
}

# daemons_here: how many kilnd processes serve this project.
daemons_here() {
	pgrep -fc -- "kilnd --project $P\$" || true
}

# wait_for CMD...: run CMD every 50 ms until it succeeds, for at most
# KILN_WAIT seconds (60 unless set). The bound only ends a wait for what
# never comes: a loaded machine (a laptop compiling, the suites running
# in parallel, stress-ng) made 10 s too short for a burst of writes to
# settle. Wall-clock seconds, not tries: a slow CMD does not stretch it.
wait_for() {
	local end=$((SECONDS + ${KILN_WAIT:-60}))
	while :; do
		"$@" && return 0
		[ "$SECONDS" -lt "$end" ] || break
		sleep 0.05
	done
	echo "timed out after ${KILN_WAIT:-60} s waiting for: $*" >&2
	return 1
}

# builds_started N: the daemon's log shows N builds started (kilnd
# --verbose logs each once its steps are scheduled, joined to those
# already running).
builds_started() {
	[ "$(grep -c 'build [0-9]* of [0-9]* steps for profile' .kiln/kilnd.log)" -ge "$1" ]
}

# json_field NAME JSON: the value of a top-level field of a flat object.
json_field() {
	printf '%s\n' "$2" | sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}

# status_field NAME: that field of 'kiln status --json'.
status_field() {
	json_field "$1" "$("$KILN" status --json)"
}

# vm_kb PID FIELD: a /proc/PID/status figure (VmRSS, VmHWM) in KiB.
vm_kb() {
	awk -v f="$2:" '$1 == f { print $2 }' "/proc/$1/status"
}

# encode_request: protobuf text format on stdin -> an encoded Request.
encode_request() {
	protoc --proto_path="$KILN_TOP/proto" --encode=kiln.Request kiln.proto
}

# send_raw FILE [URL]: send FILE's bytes as one request and print the reply
# in protobuf text format (nothing when none came within 3 s).
send_raw() {
	local url=${2:-ipc://$P/.kiln/kilnd.sock}
	timeout 10 nngcat --req0 --dial "$url" --file "$1" --raw \
		--recv-timeout 3 >reply.bin 2>/dev/null || true
	[ -s reply.bin ] || return 0
	protoc --proto_path="$KILN_TOP/proto" --decode=kiln.Reply kiln.proto <reply.bin
}

# client_loop I END: as client I, until `date +%s` reaches END (at least
# once), ask for status, put in.I through the daemon and cat it back.
# Counts rounds in ops.I; any failure goes to err.I.
client_loop() {
	local i=$1 end=$2 n=0 h
	: >"err.$i"
	while :; do
		"$KILN" status >/dev/null 2>>"err.$i" || echo "status failed" >>"err.$i"
		h=$("$KILN" put "in.$i" 2>>"err.$i" | cut -d' ' -f1)
		"$KILN" cat "$h" 2>>"err.$i" | cmp -s - "in.$i" ||
			echo "cat $h differs from in.$i" >>"err.$i"
		n=$((n + 1))
		[ "$(date +%s)" -lt "$end" ] || break
	done
	echo "$n" >"ops.$i"
}

# be64 N: N as 8 big-endian bytes.
be64() {
	local i s=""
	for i in 56 48 40 32 24 16 8 0; do
		s="$s$(printf '\\x%02x' $(($1 >> i & 255)))"
	done
	printf "$s"
}

# sp_header: the 8 bytes a req0 peer opens a stream with (nng's SP
# framing, for ipc:// and tcp:// alike): "\0SP\0", protocol 0x30, 0.
sp_header() {
	printf '\x00SP\x00\x00\x30\x00\x00'
}

# sp_tcp_msg FILE: FILE's bytes as one request on a tcp:// stream: a
# 64-bit big-endian length, a request id, the body.
sp_tcp_msg() {
	be64 $(($(stat -c %s "$1") + 4))
	printf '\x80\x00\x00\x01'
	cat "$1"
}
