#!/usr/bin/env bats
# The shared cache end to end (docs/cache.md, "Using a shared cache"): a
# real Debian nginx with its dav module on a free loopback port, and two
# projects with their own .kiln stores ("two machines") with the same
# kiln.yaml and sources. The tools log each run to a file outside both
# projects, so "the second machine ran nothing" is read from that file.

bats_require_minimum_version 1.5.0

load daemon_helpers

load cache_helpers

@test "a second machine downloads every result: zero tool runs, the same bytes, kiln why says downloaded" {
	first_machine
	wait_uploads "$M1" 3
	[ "$(ac_files)" = 6 ]   # an index and a result per step
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "the second machine ran: $(cat "$RUNS")"; false; }
	same_outputs
	printf '%s\n' "$output" | grep -q '"result":"reused"'
	run "$KILN" why -p pc up/big.txt
	[[ "$output" == *"downloaded from the shared cache"* ]] || { echo "$output"; false; }
	[ "$(status_field cache_hits)" = 3 ]
	run "$KILN" status
	[[ "$output" == *"3 steps downloaded"* ]] || { echo "$output"; false; }
	# and it is its own result now: a rebuild on that machine is a no-op
	build_in "$M2"
	[ "$(runs)" = 0 ]
}

@test "without a cache url the second machine runs everything (the test above needs the feature)" {
	first_machine
	wait_uploads "$M1" 3
	: >"$RUNS"
	sed -i '/^cache:/,/^  timeout:/d' "$M2/kiln.yaml"
	build_in "$M2"
	[ "$status" -eq 0 ]
	[ "$(runs)" = 3 ]
	[ "$(status_field cache_mode)" = off ]
}

@test "a corrupted CAS blob on the server is refused and that step is built locally" {
	first_machine
	wait_uploads "$M1" 3
	blob=$(cas_of big.txt)
	[ -f "$blob" ]
	# same length, other bytes: only the SHA-256 tells (the size is taken
	# first: in the pipeline, the redirection may truncate before a stat)
	size=$(stat -c %s "$blob")
	head -c "$size" /dev/zero | tr '\0' x >"$blob"
	[ "$(stat -c %s "$blob")" = "$size" ] && [ "$size" -gt 0 ]
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 1 ] || { echo "ran: $(cat "$RUNS")"; false; }
	grep -q 'big.txt' "$RUNS"
	same_outputs
	[ "$(status_field cache_corrupt)" -ge 1 ]
	grep -q 'is corrupt (treated as a miss' .kiln/kilnd.log
	# nothing of the bad bytes reached the store
	! grep -rqs xxxxxxxxxxxxxxxx .kiln/store/objects 2>/dev/null
	# its upload puts the right bytes back: nginx checks nothing, and a
	# HEAD sees the bad blob's size as right, so this one is not asked for
	wait_uploads "$M2" 1
	[ "$(sha256sum "$blob" | cut -d' ' -f1)" = "$(basename "$blob")" ] || { head -c 64 "$blob"; false; }
}

@test "a blob the server has is not uploaded again: HEAD first (CI and an artist publishing the same outputs)" {
	first_machine
	wait_uploads "$M1" 3
	puts=$(grep -c '"PUT /kiln/cas/' "$T/srv/access.log")
	up=$(status_field cache_bytes_up)
	# a new tool program: every key is new, every output the same bytes
	printf '# v2\n' >>"$T/tools/upper.sh"
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 3 ]
	wait_uploads "$M2" 3
	# its own index and result entries, not one blob
	[ "$(ac_files)" = 12 ]
	[ "$(grep -c '"PUT /kiln/cas/' "$T/srv/access.log")" = "$puts" ] || { grep '"PUT /kiln/cas/' "$T/srv/access.log"; false; }
	[ "$(status_field cache_skipped_uploads)" -ge 3 ] || { "$KILN" status; false; }
	# what went up: a few small entries, against machine 1's 400 KB
	[ "$(status_field cache_bytes_up)" -lt $((up / 10)) ] || { "$KILN" status; false; }
	run "$KILN" status
	[[ "$output" == *"blobs not uploaded: the server had them"* ]] || { echo "$output"; false; }
}

@test "an AC entry naming a missing CAS blob is a miss: the step runs" {
	first_machine
	wait_uploads "$M1" 3
	rm "$(cas_of a.txt)"
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 1 ] || { echo "ran: $(cat "$RUNS")"; false; }
	grep -q 'src/a.txt' "$RUNS"
	same_outputs
}

@test "the server stopped before the build: it completes locally, exit 0" {
	first_machine
	wait_uploads "$M1" 3
	nginx_stop
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 3 ]
	same_outputs
	# its uploads fail in the background, counted, never in the build
	wait_for uploads_done "$M2"
	[ "$(status_field cache_uploaded)" = 0 ]
}

@test "the server stopped in the middle of a build: it completes locally, exit 0" {
	first_machine
	wait_uploads "$M1" 3
	# a slow tool: the server goes away while the second step runs
	cat >"$T/tools/upper.sh" <<EOF
#!/bin/sh
echo "\$1" >>"$RUNS"
[ -f "$T/stop-now" ] && kill -TERM \$(cat "$T/nginx.bgpid") && rm -f "$T/stop-now"
tr a-z A-Z <"\$1" >"\$2"
EOF
	# a new tool program: every key is new, nothing is on the server
	printf '# v2\n' >>"$T/tools/upper.sh"
	# a step after them, looked up once the server is gone
	sed -i 's/^tools:$/tools:\n  concat: { run: [sh, -c, '"'"'cat "$@" > "$0"'"'"', "${out}", "${in...}"] }/' "$M2/kiln.yaml"
	printf 'assets:\n  - url: all.txt\n    tool: concat\n    inputs: ["@up/**"]\n' >>"$M2/kiln.yaml"
	touch "$T/stop-now"
	: >"$RUNS"
	build_in "$M2" -j 1
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 3 ]
	[ ! -f "$T/stop-now" ]
	[ -s "$M2/build/pc/all.txt" ]
	# the lookup after the stop failed: counted, not fatal
	[ "$(status_field cache_errors)" -ge 1 ] || { "$KILN" status; false; }
	wait_for uploads_done "$M2"
}

@test "mode read looks up but uploads nothing" {
	first_machine read
	wait_for uploads_done "$M1"
	[ "$(status_field cache_mode)" = read ]
	[ "$(ac_files)" = 0 ] && [ "$(cas_files)" = 0 ] || { find "$ROOT"; false; }
	[ "$(status_field cache_misses)" = 3 ]
}

@test "mode readwrite uploads (the test above would see files without mode read)" {
	first_machine readwrite
	wait_uploads "$M1" 3
	[ "$(ac_files)" = 6 ]
	[ "$(cas_files)" -ge 3 ]
}

@test "every AC entry kiln wrote parses as an ActionResult with SHA-256 digests" {
	first_machine
	wait_uploads "$M1" 3
	n=0 idx=0 res=0
	for f in $(find "$ROOT/ac" -type f); do
		n=$((n + 1))
		[ "$(basename "$f" | grep -cE '^[0-9a-f]{64}$')" = 1 ]
		out=$(protoc --decode_raw <"$f") || { echo "$f does not decode"; false; }
		# execution_metadata { worker: "kiln" }
		printf '%s\n' "$out" | grep -q '^9 {' || { echo "$out"; false; }
		if printf '%s\n' "$out" | grep -q '^2 {'; then
			# output_files { path, digest { hash: 64 hex, size_bytes } }
			printf '%s\n' "$out" | grep -qE '^    1: "[0-9a-f]{64}"$' || { echo "$out"; false; }
			! printf '%s\n' "$out" | grep -E '^    1: "' | grep -vqE '"[0-9a-f]{64}"'
			res=$((res + 1))
		else
			# an index: its candidates in stdout_raw (5)
			printf '%s\n' "$out" | grep -q '^5' || { echo "$out"; false; }
			idx=$((idx + 1))
		fi
	done
	[ "$n" = 6 ] && [ "$idx" = 3 ] && [ "$res" = 3 ] || { echo "$n entries: $idx indexes, $res results"; false; }
	# every digest names a blob the server has, of that SHA-256
	for h in $(cat "$ROOT"/ac/* | protoc --decode_raw 2>/dev/null | sed -n 's/^ *1: "\([0-9a-f]\{64\}\)"$/\1/p'); do
		[ -f "$ROOT/cas/$h" ]
		[ "$(sha256sum "$ROOT/cas/$h" | cut -d' ' -f1)" = "$h" ]
	done
}

# ---- discovered dependencies ---------------------------------------------

write_shader_machine() {
	local dir=$1 inner=$2
	mkdir -p "$dir/shaders/lib"
	cat >"$dir/shaders/main.frag" <<'GLSL'
#version 450
#extension GL_GOOGLE_include_directive : require
#include "lib/common.glsl"
layout(location = 0) out vec4 color;
void main() { color = tint(); }
GLSL
	printf 'vec4 tint() { return vec4(%s, 0.0, 0.0, 1.0); }\n' "$inner" >"$dir/shaders/lib/common.glsl"
	cat >"$T/tools/glsl.sh" <<EOF
#!/bin/sh
echo "\$@" >>"$RUNS"
exec glslangValidator "\$@"
EOF
	chmod +x "$T/tools/glsl.sh"
	cat >"$dir/kiln.yaml" <<EOF
kiln: 1
project: shaders
sources: [shaders]
profiles:
  pc:
cache:
  url: $URL
  mode: readwrite
tools:
  glsl:
    run: [$T/tools/glsl.sh, -V, --depfile, "\${depfile}", -o, "\${out}", "\${in}"]
    depfile: true
    trace: false
rules:
  - match: "shaders/*.frag"
    url: "shaders/\${match.name}.spv"
    tool: glsl
EOF
}

@test "a result with a discovered include is not reused where the include differs, and is where it is the same" {
	command -v glslangValidator >/dev/null || skip "glslangValidator is not installed (Debian: glslang-tools)"
	nginx_start
	write_shader_machine "$M1" 0.5
	write_shader_machine "$M2" 0.25
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 1 ]
	wait_uploads "$M1" 1
	# machine 2's include differs: its own build
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 2 ] || { echo "the differing include was not built: $(cat "$RUNS")"; false; }
	! cmp -s "$M1/build/pc/shaders/main.spv" "$M2/build/pc/shaders/main.spv"
	wait_uploads "$M2" 1
	# a third machine with machine 1's include gets machine 1's result,
	# the second candidate of the index now
	M3=$T/m3
	mkdir -p "$M3"
	write_shader_machine "$M3" 0.5
	build_in "$M3"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 2 ] || { echo "machine 3 ran: $(cat "$RUNS")"; false; }
	cmp "$M1/build/pc/shaders/main.spv" "$M3/build/pc/shaders/main.spv"
	run "$KILN" why -p pc shaders/main.spv
	[[ "$output" == *"downloaded from the shared cache"* ]] || { echo "$output"; false; }
	P=$(cd "$M3" && pwd -P); one_teardown
}

# ---- configuration -------------------------------------------------------

@test "kiln check refuses a cache: with a bad url or mode, and one without a url" {
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
profiles:
  pc:
cache:
  url: ftp://cache/kiln
  mode: sometimes
YAML
	run "$KILN" check
	[ "$status" -ne 0 ]
	[[ "$output" == *"cache.url: 'ftp://cache/kiln' is not an http:// or https:// URL"* ]] || { echo "$output"; false; }
	[[ "$output" == *"cache.mode: 'sometimes' is not a cache mode"* ]] || { echo "$output"; false; }
	printf 'kiln: 1\nproject: t\nprofiles:\n  pc:\ncache:\n  mode: read\n' >kiln.yaml
	run "$KILN" check
	[[ "$output" == *"url"* ]] || { echo "$output"; false; }
	printf 'kiln: 1\nproject: t\nprofiles:\n  pc:\ncache:\n  mode: off\n' >kiln.yaml
	run "$KILN" check
	[ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "KILN_CACHE_URL and KILN_CACHE_MODE give one machine a cache its kiln.yaml lacks" {
	first_machine
	wait_uploads "$M1" 3
	sed -i '/^cache:/,/^  timeout:/d' "$M2/kiln.yaml"
	: >"$RUNS"
	cd "$M2"
	KILN_CACHE_URL=$URL KILN_CACHE_MODE=read build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "ran: $(cat "$RUNS")"; false; }
	[ "$(status_field cache_mode)" = read ]
	same_outputs
}

@test "a bad KILN_CACHE_MODE stops the daemon from starting" {
	printf 'kiln: 1\nproject: t\nprofiles:\n  pc:\n' >kiln.yaml
	P=$M1
	KILN_CACHE_MODE=sometimes run "$KILN" build
	[ "$status" -ne 0 ]
	[[ "$output" == *"KILN_CACHE_MODE='sometimes'"* ]] || { echo "$output"; false; }
}

# ---- https ---------------------------------------------------------------

# with_ca DIR FILE: DIR's cache: names FILE as its CA
with_ca() {
	sed -i "s|^  timeout: 20s$|  timeout: 20s\n  ca_file: $2|" "$1/kiln.yaml"
}

@test "over https with ca_file naming the test's CA: a second machine downloads every result" {
	command -v openssl >/dev/null || skip "no openssl (Debian: openssl)"
	nginx_start tls
	[[ "$URL" == https://* ]]
	write_machine "$M1" readwrite
	write_machine "$M2" read
	with_ca "$M1" "$T/tls/ca.pem"
	with_ca "$M2" "$T/tls/ca.pem"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	wait_uploads "$M1" 3
	[ "$(ac_files)" = 6 ]
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "ran: $(cat "$RUNS")"; "$KILN" status; false; }
	same_outputs
	[ "$(status_field cache_url)" = "$URL" ]
	[ "$(status_field cache_errors)" = 0 ]
}

@test "over https a server the CA does not vouch for is refused: built locally, counted, logged; KILN_CACHE_CA_FILE fixes it" {
	command -v openssl >/dev/null || skip "no openssl (Debian: openssl)"
	nginx_start tls
	make_ca "$T/tls" other
	write_machine "$M1" readwrite
	with_ca "$M1" "$T/tls/other.pem"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 3 ]
	[ "$(status_field cache_errors)" -ge 1 ] || { "$KILN" status; false; }
	grep -q "shared cache $URL: TLS failed" .kiln/kilnd.log || { cat .kiln/kilnd.log; false; }
	# and nothing went up: the uploads fail the same way, counted
	wait_for uploads_done "$M1"
	[ "$(status_field cache_uploaded)" = 0 ]
	[ "$(find "$ROOT" -type f 2>/dev/null | wc -l)" = 0 ]
	# the right CA from the environment, over kiln.yaml's
	write_machine "$M2" readwrite
	with_ca "$M2" "$T/tls/other.pem"
	: >"$RUNS"
	KILN_CACHE_CA_FILE=$T/tls/ca.pem build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	wait_uploads "$M2" 3
	[ "$(ac_files)" = 6 ]
}

# ---- a server that never answers -----------------------------------------

@test "a server that accepts and never answers: the build completes within the timeouts and the breaker opens" {
	stall_start
	URL=$STALL_URL
	write_machine "$M1" readwrite
	sed -i 's/^  timeout: 20s$/  timeout: 2s/' kiln.yaml
	# more lookups than the breaker's threshold (5)
	for i in 1 2 3 4 5 6 7 8; do printf 'x%s\n' "$i" >"src/s$i.txt"; done
	start=$(date +%s)
	build_in "$M1"
	took=$(($(date +%s) - start))
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 11 ]
	# 11 lookups, 4 at a time, 2 s each at worst: 6 s without the
	# breaker; with the default 20 s timeout instead, 60 s. The bound sits
	# between, far above 6 s: a loaded machine is slow, not stalled.
	[ "$took" -lt 40 ] || { echo "took $took s"; false; }
	[ "$(status_field cache_breaker_open)" = true ] || { "$KILN" status; false; }
	[ "$(status_field cache_errors)" -ge 5 ]
	run "$KILN" status
	[[ "$output" == *"not asked for now: it kept failing"* ]] || { echo "$output"; false; }
	grep -q "shared cache $URL: .*later errors are only counted" .kiln/kilnd.log
}

# add_folder_steps DIR: a step writing a folder output and one reading it
# (each run logged like upper.sh's).
add_folder_steps() {
	sed -i "/^tools:/a\\
  split: { shell: true, trace: false, run: 'echo split >>\"$RUNS\"; cp \"\${in}\" \"\${out.d}/x\"; mkdir \"\${out.d}/s\"; echo y >\"\${out.d}/s/y\"' }\\
  join: { shell: true, trace: false, run: 'echo join >>\"$RUNS\"; cat \"\${in}/x\" \"\${in}/s/y\" >\"\${out}\"' }" "$1/kiln.yaml"
	cat >>"$1/kiln.yaml" <<'YAML'
assets:
  - { url: split, tool: split, inputs: [src/a.txt], outputs: { d: "parts/" } }
  - { url: joined.txt, tool: join, inputs: ["@split#d"] }
YAML
}

@test "steps writing or reading a folder output are neither uploaded nor looked up: the second machine runs them, the rest downloads" {
	nginx_start
	write_machine "$M1"
	write_machine "$M2"
	add_folder_steps "$M1"
	add_folder_steps "$M2"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 5 ] || { cat "$RUNS"; false; }
	wait_uploads "$M1" 3
	[ "$(cd "$M1" && status_field cache_uploaded)" = 3 ]
	[ "$(ac_files)" = 6 ]   # the three plain steps only
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(sort "$RUNS" | tr '\n' ' ')" = "join split " ] || { echo "ran: $(cat "$RUNS")"; false; }
	[ "$(cat "$M2/build/pc/joined.txt")" = "$(printf 'alpha\ny')" ]
	[ "$(cat "$M2/build/pc/parts/s/y")" = y ]
}

# many_sources DIR N: N more sources for the upper rule (N more steps).
many_sources() {
	for i in $(seq 1 "$2"); do printf 'source %s\n' "$i" >"$1/src/m$i.txt"; done
}

@test "kiln build && kiln stop, as a CI job does: every result reaches the server before the daemon exits" {
	nginx_start
	write_machine "$M1"
	many_sources "$M1" 400
	cd "$M1"
	run "$KILN" build -q
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	run "$KILN" stop
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# an index and a result per step, counted on the server
	[ "$(ac_files)" = 806 ] || { echo "the server has $(ac_files) AC entries, expected 806"; \
		grep 'shared cache' .kiln/kilnd.log; false; }
	# what the stop waited for is logged with its counts
	if grep -q 'stopping with [0-9]* results to upload' .kiln/kilnd.log; then
		grep -E 'at stop, of [0-9]+ results pending: [0-9]+ uploaded, 0 failed, 0 dropped' \
			.kiln/kilnd.log || { grep 'shared cache' .kiln/kilnd.log; false; }
	fi
}

# putstall_start: a cache server on a free port ($PUTSTALL_URL) that
# answers every GET and HEAD with a 404 at once and never answers a PUT
# (a server whose disk hangs on writes): uploads stay pending.
putstall_start() {
	free_port 93
	SPORT=$port
	python3 -c '
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def miss(self):
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()
    do_GET = do_HEAD = miss
    def do_PUT(self):
        time.sleep(3600)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
' "$SPORT" >"$T/stall.out" 2>&1 &
	echo $! >"$T/stall.bgpid"
	PUTSTALL_URL=http://127.0.0.1:$SPORT/kiln
	wait_for stall_listens
}

@test "kiln stop gives pending uploads KILN_CACHE_STOP_WAIT, then drops them, counted in the log" {
	putstall_start
	URL=$PUTSTALL_URL
	write_machine "$M1"
	many_sources "$M1" 100
	cd "$M1"
	KILN_CACHE_STOP_WAIT=1s run "$KILN" build -q
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# every PUT hangs (each gives up after the 10 s stall limit): pending
	[ "$(status_field cache_pending)" -gt 0 ] || { "$KILN" status; false; }
	run "$KILN" stop
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[[ "$output" == *"waiting for "*" uploads to the shared cache"* ]] || { echo "$output"; false; }
	grep -E 'stopping with [0-9]+ results to upload \(waiting up to 1 s' .kiln/kilnd.log ||
		{ grep 'shared cache' .kiln/kilnd.log; false; }
	grep -E 'at stop, of [0-9]+ results pending: 0 uploaded, [0-9]+ failed, [1-9][0-9]* dropped' \
		.kiln/kilnd.log || { grep 'shared cache' .kiln/kilnd.log; false; }
}

@test "kiln build --wait-uploads returns once every result is on the server, and says how many" {
	nginx_start
	write_machine "$M1"
	many_sources "$M1" 200
	cd "$M1"
	run "$KILN" build -q --wait-uploads
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[[ "$output" == *"shared cache: 203 results uploaded, 0 uploads failed or dropped"* ]] || \
		{ echo "$output"; false; }
	[ "$(status_field cache_pending)" = 0 ]
	[ "$(ac_files)" = 406 ] || { echo "the server has $(ac_files) AC entries, expected 406"; false; }
}

# add_need_step DIR: a level step whose tool asks for two of the upper
# steps' outputs with kiln need (and logs its run to $RUNS).
add_need_step() {
	mkdir -p "$1/levels"
	printf 'a\nb\n' >"$1/levels/one.lvl"
	sed -i 's/^sources: \[src\]/sources: [src, levels]/' "$1/kiln.yaml"
	sed -i '/^tools:/a\
  levelc:\
    run: '"'"'echo "${in}" >>"$RUNS"; for t in $(cat ${in}); do p=$("$KILN" need "up/$t.txt") || exit 1; cat "$p"; done > ${out}'"'"'\
    shell: true\
    trace: false' "$1/kiln.yaml"
	sed -i "s|\\\$RUNS|$RUNS|" "$1/kiln.yaml"
	cat >>"$1/kiln.yaml" <<'YAML'
  - match: "levels/*.lvl"
    url: "levels/${match.name}"
    tool: levelc
YAML
}

@test "a step that used kiln need is uploaded and restored on a second machine: zero tool runs" {
	nginx_start
	write_machine "$M1"
	write_machine "$M2"
	add_need_step "$M1"
	add_need_step "$M2"
	build_in "$M1"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 4 ] || { echo "ran: $(cat "$RUNS")"; false; }
	[ "$(cat "$M1/build/pc/levels/one")" = "$(printf 'ALPHA\nBRAVO')" ]
	wait_uploads "$M1" 4
	[ "$(ac_files)" = 8 ]   # the level's index and result too
	: >"$RUNS"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(runs)" = 0 ] || { echo "the second machine ran: $(cat "$RUNS")"; false; }
	[ "$(cat "$M2/build/pc/levels/one")" = "$(printf 'ALPHA\nBRAVO')" ]
	[ "$(status_field cache_hits)" = 4 ]
	# its needs hold there as they did here: a rebuild runs nothing
	build_in "$M2"
	[ "$(runs)" = 0 ]
	# a needed output that differs on the second machine: the level runs
	printf 'bravo2\n' >"$M2/src/b.txt"
	build_in "$M2"
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(sort "$RUNS" | tr '\n' ' ')" = "levels/one.lvl src/b.txt " ] || { echo "ran: $(cat "$RUNS")"; false; }
	[ "$(cat "$M2/build/pc/levels/one")" = "$(printf 'ALPHA\nBRAVO2')" ]
}
