#!/usr/bin/env bats
# wire_limits.bats — what kilnd accepts before it reads a request: a
# message made to cost memory out of proportion to its size is refused
# within the decode budget, and a plain tcp:// listener is allowed only on
# a host that resolves to loopback (not on one that merely looks like it).

bats_require_minimum_version 1.5.0

load daemon_helpers

# A free-looking port for this case, and a 32-character token.
tcp_setup() {
	free_port
	head -c 24 /dev/urandom | base64 | tr -d '\n/+=' | head -c 32 >token
	echo >>token
}

@test "2 MiB of tiny unknown fields is refused without costing tens of MiB" {
	"$KILND" --project .
	hwm0=$(vm_kb "$(daemon_pid)" VmHWM)
	# field 1000 = 0, again and again, 2 MiB less the room nng's header
	# needs: protobuf-c alone would keep ~70 MiB of it
	head -c $((((2 << 20) - 1024) / 3 * 3)) /dev/zero |
		sed 's/\x00\x00\x00/\xc0\x3e\x00/g' >tiny.bin
	run send_raw tiny.bin
	[[ "$output" == *"status: STATUS_BAD_REQUEST"* ]] || { echo "$output"; false; }
	hwm=$(vm_kb "$(daemon_pid)" VmHWM)
	echo "VmHWM ${hwm0} KiB before, ${hwm} KiB after"
	[ $((hwm - hwm0)) -lt $((32 << 10)) ]
	[ "$(status_field bad_requests)" -eq 1 ]
	"$KILN" status >/dev/null
}

@test "a 2 MiB blob chunk still fits the decode budget" {
	"$KILND" --project .
	head -c $(((2 << 20) - (16 << 10))) /dev/urandom >big.bin
	h=$("$KILN" put big.bin | cut -d' ' -f1)
	"$KILN" cat "$h" | cmp - big.bin
	[ "$(status_field bad_requests)" -eq 0 ]
}

@test "plain tcp:// is refused on a name that only looks like loopback" {
	tcp_setup
	for host in 127.0.0.1.example.invalid '[::ffff:10.0.0.1]' 0.0.0.0 '' '*'; do
		run --separate-stderr "$KILND" --project . --listen "tcp://$host:$port" \
			--token-file token
		[ "$status" -eq 2 ] || { echo "$host: status $status: $stderr"; false; }
		[[ "$stderr" == *"plain tcp:// only on the loopback"* ]] ||
			{ echo "$host: $stderr"; false; }
	done
	[ ! -e .kiln/kilnd.pid ]
}

@test "plain tcp:// is served on any spelling of a loopback address" {
	tcp_setup
	for host in '[0:0:0:0:0:0:0:1]' 127.1 localhost; do
		run --separate-stderr "$KILND" --project . --listen "tcp://$host:$port" \
			--token-file token
		[ "$status" -eq 0 ] || { echo "$host: status $status: $stderr"; false; }
		run --separate-stderr "$KILN" --connect "tcp://$host:$port" \
			--token-file token status
		[ "$status" -eq 0 ] || { echo "$host: $stderr"; false; }
		[[ "$output" == *"listen    tcp://$host:$port"* ]]
		"$KILN" stop >/dev/null
		wait_for test ! -e .kiln/kilnd.pid
		port=$((port + 1))
	done
}
