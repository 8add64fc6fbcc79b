#!/usr/bin/env bats
# Signed shared-cache entries (docs/cache.md, "Signed entries"): anyone who
# can PUT to the server can rewrite a result entry to name another real
# blob. With cache: { sign_key_file: ... } writers sign every AC entry and
# readers take only those signed with their key; the rest count as
# corrupt and the step is built here. Real nginx, two real daemons
# ("two machines", cache_helpers.bash).

bats_require_minimum_version 1.5.0

load daemon_helpers

load cache_helpers

# key_file NAME: a fresh secret, mode 600, at $T/NAME.
key_file() {
	(umask 077 && openssl rand -hex 32 >"$T/$1")
}

# with_key DIR FILE: DIR's kiln.yaml signs and checks with FILE.
with_key() {
	sed -i "s|^cache:\$|cache:\n  sign_key_file: $2|" "$1/kiln.yaml"
}

# signed_first_machine: machine 1 (readwrite) and machine 2 (read) with the
# same key; machine 1 built and uploaded the three steps.
signed_first_machine() {
	key_file key
	nginx_start
	write_machine "$M1" readwrite
	write_machine "$M2" read
	with_key "$M1" "$T/key"
	with_key "$M2" "$T/key"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; return 1; }
	wait_uploads "$M1" 3
	grep -q 'entries signed and checked' "$M1/.kiln/kilnd.log"
}

# ac_naming HEX: the AC file on the server whose bytes name the blob HEX
# (the result entry of the step that made it).
ac_naming() {
	grep -rl --binary-files=text "$1" "$ROOT/ac"
}

# poison [keep-signature]: machine 1's result entry for up/a.txt rewritten
# to name the blob of up/b.txt (another real blob of the same size: only
# its hash changes). Without keep-signature the signature (the entry's
# last 35 bytes, docs/cache.md) is cut off: what someone without the key
# would write.
poison() {
	local a b entry
	a=$(sha256sum "$M1/build/pc/up/a.txt" | cut -d' ' -f1)
	b=$(sha256sum "$M1/build/pc/up/b.txt" | cut -d' ' -f1)
	entry=$(ac_naming "$a")
	[ -n "$entry" ] && [ "$(printf '%s\n' "$entry" | wc -l)" = 1 ] || { echo "result entry of a: '$entry'"; return 1; }
	python3 - "$entry" "$a" "$b" "${1:-}" <<'EOF'
import sys
path, a, b, keep = sys.argv[1:]
data = open(path, "rb").read()
assert data.count(a.encode()) == 1
data = data.replace(a.encode(), b.encode())
if keep != "keep-signature":
    data = data[:-35]
open(path, "wb").write(data)
EOF
}

# m2_refuses_a: machine 2 built up/a.txt itself, with the right bytes, and
# took the other two from the cache; the refused entry is counted.
m2_refuses_a() {
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; return 1; }
	[ "$(runs)" = 1 ] || { echo "ran: $(cat "$RUNS")"; return 1; }
	grep -q 'a.txt' "$RUNS"
	[ "$(cat "$M2/build/pc/up/a.txt")" = ALPHA ] || { echo "a.txt holds: $(cat "$M2/build/pc/up/a.txt")"; return 1; }
	same_outputs
	[ "$(status_field cache_corrupt)" -ge 1 ]
	[ "$(status_field cache_hits)" = 2 ] || { echo "hits: $(status_field cache_hits)"; return 1; }
	grep -q 'not signed with sign_key_file' "$M2/.kiln/kilnd.log"
}

@test "signed: a second machine with the same key downloads every result, zero tool runs" {
	signed_first_machine
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "the second machine ran: $(cat "$RUNS")"; false; }
	same_outputs
	[ "$(status_field cache_hits)" = 3 ]
	[ "$(status_field cache_corrupt)" = 0 ]
}

@test "signed: a result entry rewritten to name another real blob, its signature cut off, is refused and the step built locally" {
	signed_first_machine
	poison
	m2_refuses_a
}

@test "signed: a result entry rewritten to name another real blob, its old signature kept, is refused and the step built locally" {
	signed_first_machine
	poison keep-signature
	m2_refuses_a
}

@test "signed: KILN_CACHE_SIGN_KEY_FILE gives a machine the key its kiln.yaml lacks; the rewritten entry is refused" {
	signed_first_machine
	poison
	sed -i '/sign_key_file/d' "$M2/kiln.yaml"
	export KILN_CACHE_SIGN_KEY_FILE=$T/key
	m2_refuses_a
}

@test "without a key the rewritten entry is served, as before signing (the tests above need the feature)" {
	signed_first_machine
	poison
	sed -i '/sign_key_file/d' "$M2/kiln.yaml"
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ]
	# the wrong bytes: what a key prevents
	[ "$(cat "$M2/build/pc/up/a.txt")" = BRAVO ]
}

@test "signed: entries signed with another key, or unsigned ones, are refused; the machine builds everything" {
	signed_first_machine
	key_file other
	sed -i "s|sign_key_file: .*|sign_key_file: $T/other|" "$M2/kiln.yaml"
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 3 ]
	same_outputs
	[ "$(status_field cache_hits)" = 0 ]
	[ "$(status_field cache_corrupt)" = 3 ]
}

@test "a writer given a key replaces the unsigned entries it finds: a reader with the key then restores everything" {
	nginx_start
	key_file key
	write_machine "$M1" readwrite
	write_machine "$M2" read
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	wait_uploads "$M1" 3
	# machine 1 starts signing with an empty store: it builds again and
	# writes its entries over the unsigned ones (an index it cannot
	# vouch for is not merged into the signed one)
	(cd "$M1" && "$KILN" stop && rm -rf .kiln)
	with_key "$M1" "$T/key"
	with_key "$M2" "$T/key"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	wait_uploads "$M1" 3
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "ran: $(cat "$RUNS")"; false; }
	same_outputs
}

@test "a sign_key_file others can read, or too short, is refused by name: the machine builds without the cache" {
	nginx_start
	write_machine "$M1" readwrite
	openssl rand -hex 32 >"$T/key"
	chmod 644 "$T/key"
	with_key "$M1" "$T/key"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 3 ]
	grep -q "sign_key_file $T/key: others may read or write it" "$M1/.kiln/kilnd.log" || { cat "$M1/.kiln/kilnd.log"; false; }
	[ "$(ac_files)" = 0 ]
	(cd "$M1" && "$KILN" stop)
	(umask 077 && echo short >"$T/key2")
	sed -i "s|sign_key_file: .*|sign_key_file: $T/key2|" "$M1/kiln.yaml"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	grep -q "sign_key_file $T/key2: shorter than 32 characters" "$M1/.kiln/kilnd.log" || { cat "$M1/.kiln/kilnd.log"; false; }
	rm -f "$T/key2"
	(cd "$M1" && "$KILN" stop)
	build_in "$M1"
	grep -q "sign_key_file $T/key2: not found" "$M1/.kiln/kilnd.log" || { cat "$M1/.kiln/kilnd.log"; false; }
}
