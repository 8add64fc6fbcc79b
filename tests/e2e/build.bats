#!/usr/bin/env bats
# kiln build end to end: the real kilnd (auto-started) and kiln on a small
# project whose tools are cp, cat and sh. Which steps ran is read from
# `kiln build --json` (one object per step that ran, was reused from the
# cache, failed or was skipped); outputs are checked on disk.

bats_require_minimum_version 1.5.0

load daemon_helpers

# The test project: two sources copied one to one, concatenated many to
# one, a first-line extractor for early cutoff and a variable-using step.
write_project() {
	mkdir -p src
	printf 'alpha\nsecond line\n' >src/a.txt
	printf 'bravo\n' >src/b.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: { vars: { greeting: hello } }
  other: { vars: { greeting: bye } }
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  concat:
    run: [sh, -c, 'cat "$@" > "$0"', "${out}", "${in...}"]
    version: 1
  firstline: { run: [sh, -c, 'head -n 1 "$0" > "$1"', "${in}", "${out}"] }
  upper: { run: [sh, -c, 'tr a-z A-Z < "$0" > "$1"', "${in}", "${out}"] }
  greet: { run: [sh, -c, 'echo "$0" > "$1"; cat "$2" >> "$1"', "${greeting}", "${out}", "${in}"] }
  prefix: { run: [sh, -c, 'printf "%s" "$0" > "$1"; cat "$2" >> "$1"', "${param.mark}", "${out}", "${in}"] }
rules:
  - match: "src/*.txt"
    url: "copy/${match.name}.txt"
    tool: copy
assets:
  - url: all.txt
    tool: concat
    inputs: ["@copy/**"]
  - url: first.txt
    tool: firstline
    inputs: [src/a.txt]
  - url: first-upper.txt
    tool: upper
    inputs: ["@first.txt"]
  - url: greet.txt
    tool: greet
    inputs: [src/b.txt]
  - url: marked.txt
    tool: prefix
    inputs: [src/b.txt]
    params: { mark: ">>" }
YAML
}

# build ARGS...: kiln build --json; RAN is the sorted, space-separated URLs
# of the steps that ran.
build() {
	run --separate-stderr "$KILN" build --json "$@"
	RAN=$(printf '%s\n' "$output" | grep '"event":"step"' | grep '"result":"ran"' |
	      sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//')
}

# expect_ran "URL ...": exactly those steps ran.
expect_ran() {
	[ "$RAN" = "$1" ] || { echo "ran: '$RAN'"; echo "expected: '$1'"; echo "$output"; echo "$stderr"; false; }
}

build_ok() {
	build "$@"
	[ "$status" -eq 0 ] || { echo "status $status"; echo "$output"; echo "$stderr"; false; }
}

setup_file() {
	:
}

@test "a full build runs every step, materializes its outputs and writes the index map" {
	write_project
	build_ok
	expect_ran "all.txt copy/a.txt copy/b.txt first-upper.txt first.txt greet.txt marked.txt"
	[ "$(cat build/default/copy/a.txt)" = "$(cat src/a.txt)" ]
	[ "$(cat build/default/all.txt)" = "$(cat src/a.txt src/b.txt)" ]
	[ "$(cat build/default/first-upper.txt)" = "ALPHA" ]
	[ "$(cat build/default/greet.txt)" = "$(printf 'hello\nbravo')" ]
	[ "$(cat build/default/marked.txt)" = "$(printf '>>bravo')" ]
	# the index map names every output with its content hash
	head -n 1 build/default/kiln-index.txt | grep -qx 'kiln-index 1 default'
	[ "$(grep -c . build/default/kiln-index.txt)" -eq 8 ]
	while IFS="$(printf '\t')" read -r url hash size file; do
		[ "$(xxh128sum "build/default/$file" | cut -d' ' -f1)" = "$hash" ]
		[ "$(stat -c %s "build/default/$file")" = "$size" ]
	done < <(tail -n +2 build/default/kiln-index.txt)
	# outputs are copies of the store's blobs, of their own (materialize: copy)
	[ "$(stat -c %h build/default/all.txt)" -eq 1 ]
	printf '%s\n' "$output" | tail -n 1 | grep -q '"ran":7'
}

@test "a second build runs no tool" {
	write_project
	build_ok
	build_ok
	expect_ran ""
	printf '%s\n' "$output" | tail -n 1 | grep -q '"ran":0,"reused":7,"failed":0'
}

@test "touching a source, or rewriting it unchanged, runs no tool" {
	write_project
	build_ok
	touch -d '+1 minute' src/a.txt
	cp src/b.txt b.tmp && mv b.tmp src/b.txt
	build_ok
	expect_ran ""
}

@test "changing one source reruns exactly the steps that depend on it" {
	write_project
	build_ok
	printf 'BRAVO 2\n' >src/b.txt
	build_ok
	expect_ran "all.txt copy/b.txt greet.txt marked.txt"
	[ "$(cat build/default/copy/b.txt)" = "BRAVO 2" ]
}

@test "early cutoff: an intermediate output that hashes as before stops the rebuild there" {
	write_project
	build_ok
	printf 'alpha\nanother second line\n' >src/a.txt
	build_ok
	# first.txt reran (its input changed) but made the same bytes, so
	# first-upper.txt, which needs it, did not
	expect_ran "all.txt copy/a.txt first.txt"
}

@test "a tool version change reruns exactly that tool's steps" {
	write_project
	build_ok
	sed -i 's/version: 1/version: 2/' kiln.yaml
	build_ok
	expect_ran "all.txt"
	run "$KILN" why all.txt
	[ "$status" -eq 0 ]
	[[ "$output" == *"tool version changed 1 -> 2"* ]] || { echo "$output"; false; }
}

@test "a param change reruns exactly the step that has it" {
	write_project
	build_ok
	sed -i 's/mark: ">>"/mark: "=="/' kiln.yaml
	build_ok
	expect_ran "marked.txt"
	[ "$(cat build/default/marked.txt)" = "==bravo" ]
	run "$KILN" why marked.txt
	[[ "$output" == *"param mark"* ]] || { echo "$output"; false; }
}

@test "a profile variable change reruns exactly the steps that use it" {
	write_project
	build_ok
	sed -i 's/greeting: hello/greeting: howdy/' kiln.yaml
	build_ok
	expect_ran "greet.txt"
	run "$KILN" why greet.txt
	[[ "$output" == *"var greeting changed hello -> howdy"* ]] || { echo "$output"; false; }
	# another profile builds its own outputs beside
	build_ok -p other
	[ "$(head -n 1 build/other/greet.txt)" = "bye" ]
}

@test "kiln why names the input that changed, from which hash to which" {
	write_project
	build_ok
	old=$(xxh128sum src/b.txt | cut -c1-8)
	printf 'changed\n' >src/b.txt
	new=$(xxh128sum src/b.txt | cut -c1-8)
	build_ok
	run "$KILN" why copy/b.txt
	[ "$status" -eq 0 ]
	[[ "$output" == *"in src/b.txt: $old -> $new"* ]] || { echo "$output"; false; }
	run "$KILN" why copy/a.txt
	[[ "$output" == *"up to date"* ]] || { echo "$output"; false; }
	run "$KILN" why no/such/step
	[ "$status" -ne 0 ]
}

@test "deleting build/ restores every output from the store without running a tool" {
	write_project
	build_ok
	before=$(cat build/default/kiln-index.txt)
	rm -rf build
	build_ok
	expect_ran ""
	[ "$(cat build/default/kiln-index.txt)" = "$before" ]
	[ "$(cat build/default/all.txt)" = "$(cat src/a.txt src/b.txt)" ]
}

@test "a restore says up to date; a step whose blob is gone from the store runs again and says so" {
	write_project
	build_ok
	rm -rf build
	build_ok
	expect_ran ""
	run "$KILN" why copy/a.txt
	[[ "$output" == *"up to date"* ]] || { echo "$output"; false; }
	# copy/a.txt's output blob (and build/) gone: the same key, no cached result
	h=$(awk -F'\t' '$1 == "copy/a.txt" { print $2 }' build/default/kiln-index.txt)
	[ -n "$h" ]
	rm -rf build
	chmod u+w ".kiln/store/objects/${h:0:2}"
	rm -f ".kiln/store/objects/${h:0:2}/${h:2}"
	build_ok
	expect_ran "copy/a.txt"
	run "$KILN" why copy/a.txt
	[[ "$output" == *"its cached outputs are gone from the store"* ]] || { echo "$output"; false; }
	[ "$(cat build/default/copy/a.txt)" = "$(cat src/a.txt)" ]
}

@test "an output edited in build/ is detected by its hash and rebuilt" {
	write_project
	build_ok
	chmod u+w build/default/first-upper.txt
	printf 'TAMPERED\n' >build/default/first-upper.txt
	build_ok
	[ "$(cat build/default/first-upper.txt)" = "ALPHA" ]
}

@test "-n says what would run and why, and runs nothing" {
	write_project
	build_ok
	printf 'new b\n' >src/b.txt
	run "$KILN" build -n
	[ "$status" -eq 0 ]
	[[ "$output" == *"would run copy/b.txt: in src/b.txt changed"* ]] || { echo "$output"; false; }
	[[ "$output" == *"would run all.txt"* ]]
	[[ "$output" != *"would run copy/a.txt"* ]]
	[ "$(cat build/default/copy/b.txt)" = "bravo" ]
}

add_failing_step() {
	cat >>kiln.yaml <<'YAML'
  - url: broken.txt
    tool: breaks
    inputs: [src/a.txt]
  - url: after-broken.txt
    tool: copy
    inputs: ["@broken.txt"]
YAML
	sed -i 's/^tools:/tools:\n  breaks: { run: [sh, -c, "echo working on $0; echo cannot frobnicate >\&2; exit 3", "${in}"] }/' kiln.yaml
}

@test "a failing step fails the build with its stderr; its dependents do not run" {
	write_project
	add_failing_step
	run --separate-stderr "$KILN" build -j 1
	[ "$status" -eq 1 ] || { echo "status $status: $output"; false; }
	[[ "$output" == *"FAILED broken.txt"* ]] || { echo "$output"; false; }
	[[ "$output" == *"exited with status 3"* ]]
	[[ "$output" == *"cannot frobnicate"* ]]
	[ ! -e build/default/after-broken.txt ]
	[ ! -e build/default/broken.txt ]
	# the whole log is kept
	run "$KILN" log broken.txt
	[[ "$output" == *"working on src/a.txt"* ]] || { echo "$output"; false; }
	# the index has nothing of it
	! grep -q broken build/default/kiln-index.txt || false
	# the next build tries it again
	build
	[ "$status" -eq 1 ]
	[[ "$RAN" != *broken* ]]
	printf '%s\n' "$output" | grep '"url":"broken.txt"' | grep -q '"result":"failed"'
}

@test "-k keeps building what does not depend on the failure" {
	write_project
	add_failing_step
	build -k -j 1
	[ "$status" -eq 1 ]
	expect_ran "all.txt copy/a.txt copy/b.txt first-upper.txt first.txt greet.txt marked.txt"
	printf '%s\n' "$output" | grep '"url":"after-broken.txt"' | grep -q '"result":"skipped"'
}

@test "a tool that is not on PATH fails its steps naming the tool and where it is defined" {
	write_project
	sed -i 's/^tools:/tools:\n  ghost: { run: [no-such-program-kiln, "${in}", "${out}"] }/' kiln.yaml
	cat >>kiln.yaml <<'YAML'
  - url: ghost.txt
    tool: ghost
    inputs: [src/a.txt]
YAML
	run "$KILN" build -k
	[ "$status" -eq 1 ]
	[[ "$output" == *"tool 'ghost' (kiln.yaml:"*"program 'no-such-program-kiln' not found"* ]] || { echo "$output"; false; }
}

@test "a missing program is one short line: the tool, the program, where it was looked for" {
	write_project
	sed -i 's/^tools:/tools:\n  ghost: { run: [no-such-program-kiln, "${in}", "${out}"] }\n  local: { run: [tools\/gone.sh, "${in}", "${out}"] }/' kiln.yaml
	cat >>kiln.yaml <<'YAML'
  - { url: ghost.txt, tool: ghost, inputs: [src/a.txt] }
  - { url: local.txt, tool: local, inputs: [src/a.txt] }
YAML
	# a long PATH, as real ones are: it is not repeated in the message
	long=$(printf '/nonexistent/folder-%02d:' $(seq 1 30))
	run env PATH="${long}/usr/local/bin:/usr/bin:/bin" "$KILN" build -k ghost.txt
	[ "$status" -eq 1 ]
	line=$(printf '%s\n' "$output" | grep "tool 'ghost'")
	[ "$line" = "  tool 'ghost' (kiln.yaml:8): program 'no-such-program-kiln' not found or not executable, looked for in PATH's 33 folders, /nonexistent/folder-01 ... /bin" ] ||
		{ echo "$output"; false; }
	[ "${#line}" -lt 200 ]
	run "$KILN" build -k local.txt
	[ "$status" -eq 1 ]
	[[ "$output" == *"  tool 'local' (kiln.yaml:9): program 'tools/gone.sh' not found or not executable, looked for at $P/tools/gone.sh"* ]] ||
		{ echo "$output"; false; }
}

@test "a step that does not write its declared output fails" {
	write_project
	sed -i 's/^tools:/tools:\n  lazy: { run: [true, "${in}"] }/' kiln.yaml
	cat >>kiln.yaml <<'YAML'
  - url: lazy.txt
    tool: lazy
    inputs: [src/a.txt]
YAML
	run "$KILN" build -k
	[ "$status" -eq 1 ]
	[[ "$output" == *"did not write its output"* ]] || { echo "$output"; false; }
}

@test "description errors exit 2 naming file and line" {
	write_project
	sed -i 's/tool: greet/tool: gret/' kiln.yaml
	run --separate-stderr "$KILN" build
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"kiln.yaml:"*"gret"* ]] || { echo "$stderr"; false; }
	run "$KILN" build no/such/url
	[ "$status" -eq 2 ]
}

# some_copy_published: kiln cat finds one of the copy steps' outputs in
# the store's index.
some_copy_published() {
	local u
	for u in a b $(seq -f 's%g' 1 12); do
		"$KILN" cat "copy/$u.txt" >/dev/null 2>&1 && return 0
	done
	return 1
}

@test "kill -9 of the daemon mid-build, then a build that completes correctly" {
	write_project
	for i in $(seq 1 12); do printf 'slow %s\n' "$i" >"src/s$i.txt"; done
	sed -i 's/copy: { run: \[cp, "${in}", "${out}"\] }/copy: { run: [sh, -c, "sleep 0.3; cp \\"$0\\" \\"$1\\"", "${in}", "${out}"] }/' kiln.yaml
	"$KILN" check
	"$KILN" build -j 2 >first.log 2>&1 &
	client=$!
	# wait until some steps are published, then kill the daemon hard
	wait_for test -e build/default/copy/a.txt -o -e build/default/copy/s1.txt
	# a step's records are committed (published) up to 100 ms after it
	# ends: wait until one is, as the check below counts them
	wait_for some_copy_published || { cat first.log; false; }
	kill -9 "$(daemon_pid)"
	wait "$client" || true
	# published = in the store's index (read offline: no daemon runs now)
	done_before=0
	for u in a b $(seq -f 's%g' 1 12); do
		if "$KILN" cat "copy/$u.txt" >/dev/null 2>&1; then done_before=$((done_before + 1)); fi
	done
	[ "$done_before" -ge 1 ] || { echo "nothing was published before the kill"; false; }
	build_ok -j 2
	for i in $(seq 1 12); do
		[ "$(cat "build/default/copy/s$i.txt")" = "slow $i" ]
	done
	[ "$(cat build/default/all.txt)" = "$(cat build/default/copy/*.txt)" ]
	# what was published before the kill did not run again (outputs
	# materialized but not yet committed may run again: they were not
	# published)
	ran_copies=$(printf '%s\n' $RAN | grep -c '^copy/' || true)
	[ "$ran_copies" -le $((14 - done_before)) ] || { echo "reran $ran_copies copies, $done_before were done"; false; }
	build_ok
	expect_ran ""
}

@test "two clients building at once share the work: each step runs once" {
	write_project
	# every run of a copy appends a fresh nonce: a step run twice (once
	# per client) would give the two clients different output hashes
	sed -i 's/copy: { run: \[cp, "${in}", "${out}"\] }/copy: { run: [sh, -c, "sleep 0.2; cp \\"$0\\" \\"$1\\"; date +%s%N >> \\"$1\\"", "${in}", "${out}"] }/' kiln.yaml
	"$KILN" status >/dev/null
	"$KILN" build --json >one.json 2>&1 &
	a=$!
	"$KILN" build --json >two.json 2>&1 &
	b=$!
	wait "$a"
	wait "$b"
	for f in one.json two.json; do
		grep -q '"event":"build"' "$f"
		! grep '"event":"build"' "$f" | grep -qv '"failed":0' || false
	done
	# each copy step: one output hash over both clients' events (both
	# builds saw the same run), and that is what build/ holds
	for u in a b; do
		hashes=$(cat one.json two.json | grep "\"url\":\"copy/$u.txt\"" | grep '"result":"ran"' |
		         sed 's/.*"hash":"\([0-9a-f]*\)".*/\1/' | sort -u)
		[ "$(printf '%s\n' "$hashes" | grep -c .)" -eq 1 ] || { echo "copy/$u.txt: $hashes"; cat one.json two.json; false; }
		[ "$hashes" = "$(xxh128sum build/default/copy/$u.txt | cut -d' ' -f1)" ]
		# the source's lines and one nonce: the tool wrote it once
		[ "$(grep -c . build/default/copy/$u.txt)" -eq $(($(grep -c . src/$u.txt) + 1)) ]
	done
	# and both clients were told about the step
	grep -q '"url":"copy/a.txt"' one.json
	grep -q '"url":"copy/a.txt"' two.json
}

@test "a missing source file fails its step, naming the asset's file and line" {
	write_project
	build_ok
	cat >>kiln.yaml <<'YAML'
  - url: gone.txt
    tool: copy
    inputs: [src/gone.txt]
YAML
	run --separate-stderr "$KILN" build
	[ "$status" -eq 1 ] || { echo "status $status"; echo "$output"; echo "$stderr"; false; }
	[[ "$output" == *"missing source file 'src/gone.txt' (an input of gone.txt, kiln.yaml:"* ]] ||
		{ echo "$output"; false; }
	# a source deleted between builds: the project is loaded again
	rm src/b.txt
	sed -i '/gone.txt/,+2d' kiln.yaml
	sed -i 's/inputs: \[src\/b.txt\]/inputs: [src\/a.txt]/' kiln.yaml
	build_ok
	# a full build leaves only the profile's outputs in build/
	[ ! -e build/default/copy/b.txt ]
	! grep -q 'copy/b.txt' build/default/kiln-index.txt || false
	! printf '%s\n' "$output" | grep -q '"url":"copy/b.txt"' || false
}

@test "Ctrl-C on the client cancels its build and kills its running tools" {
	write_project
	sed -i 's/^tools:/tools:\n  slow: { run: [sh, -c, "echo started > \\"$1\\".started; sleep 31; cp \\"$0\\" \\"$1\\"", "${in}", "${out}"] }/' kiln.yaml
	sed -i 's/tool: firstline/tool: slow/' kiln.yaml
	"$KILN" status >/dev/null
	"$KILN" build -j 2 first.txt first-upper.txt >ctrlc.log 2>&1 &
	client=$!
	wait_for sh -c 'ls .kiln/scratch/*/*/first.txt.started >/dev/null 2>&1'
	kill -INT "$client"
	status=0
	wait "$client" || status=$?
	[ "$status" -eq 130 ] || { echo "exit $status"; cat ctrlc.log; false; }
	# the summary counts the cancelled steps in plain words
	grep -qE ', [0-9]+ cancelled in [0-9.]+ s$' ctrlc.log || { cat ctrlc.log; false; }
	! grep -q 'cancelled  in' ctrlc.log || false
	# the tool is gone, nothing is queued, and the daemon still serves
	wait_for sh -c '! pgrep -f "sleep 3[1]" >/dev/null'
	[ "$(status_field build_queue)" = "0" ]
	[ ! -e build/default/first.txt ]
	build_ok copy/a.txt
}

@test "kiln stop during a build stops the daemon promptly, killing its tools" {
	write_project
	sed -i 's/copy: { run: \[cp, "${in}", "${out}"\] }/copy: { run: [sh, -c, "sleep 3; cp \\"$0\\" \\"$1\\"", "${in}", "${out}"] }/' kiln.yaml
	"$KILN" build >stopped.log 2>&1 &
	client=$!
	wait_for sh -c 'ls -d .kiln/scratch/*/*/ >/dev/null 2>&1'
	pid=$(daemon_pid)
	run timeout 20 "$KILN" stop
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# gone at once, or on its way out (a zombie its parent has not reaped)
	wait_for gone_now "$pid"
	wait "$client" || true
	# the next build finishes the work
	build_ok
	[ "$(cat build/default/all.txt)" = "$(cat src/a.txt src/b.txt)" ]
}

@test "file names reach a shell command quoted: a name cannot inject commands" {
	write_project
	printf 'x\n' >"src/q'\$(touch PWNED)'.txt"
	sed -i "s/^tools:/tools:\n  shcopy: { shell: true, run: \"cat '\${in}' > '\${out}'\" }/" kiln.yaml
	sed -i 's/    tool: copy$/    tool: shcopy/' kiln.yaml
	"$KILN" check
	build -k
	[ ! -e PWNED ]
	[ "$(cat build/default/copy/a.txt)" = "$(cat src/a.txt)" ]
}

@test "a dry run leaves the next build's decisions and build/ right" {
	write_project
	printf 'v1\n' >src/b.txt
	build_ok
	printf 'v2\n' >src/b.txt
	build_ok
	printf 'v1\n' >src/b.txt
	run "$KILN" build -n
	[ "$status" -eq 0 ]
	build_ok
	[ "$(cat build/default/copy/b.txt)" = "v1" ]
	grep -q "$(xxh128sum build/default/copy/b.txt | cut -d' ' -f1)" build/default/kiln-index.txt
}

@test "two outputs that would land on one file in build/ are a description error" {
	write_project
	cat >>kiln.yaml <<'YAML'
  - url: copy/x
    tool: copy
    inputs: [src/a.txt]
    outputs: a.txt
YAML
	run --separate-stderr "$KILN" build
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"outputs collide in build/"* ]] || { echo "$stderr"; false; }
}

@test "files a step's depfile names are dependencies: editing one reruns it, warm or after a restart" {
	write_project
	mkdir -p inc
	printf 'part one\n' >inc/part.h
	printf 'inc/part.h\n' >src/list.lst
	sed -i 's/^tools:/tools:\n  incl: { run: [sh, -c, "f=$(cat \\"$0\\"); cat \\"$f\\" > \\"$1\\"; printf \\"%s: %s %s\\\\n\\" \\"$1\\" \\"$0\\" \\"$f\\" > \\"$2\\"", "${in}", "${out}", "${depfile}"], depfile: true }/' kiln.yaml
	cat >>kiln.yaml <<'YAML'
  - url: included.txt
    tool: incl
    inputs: [src/list.lst]
YAML
	"$KILN" check
	build_ok
	[ "$(cat build/default/included.txt)" = "part one" ]
	build_ok
	expect_ran ""
	printf 'part two\n' >inc/part.h
	build_ok
	expect_ran "included.txt"
	[ "$(cat build/default/included.txt)" = "part two" ]
	run "$KILN" why included.txt
	[[ "$output" == *"discovered dependency inc/part.h (depfile) changed"* ]] || { echo "$output"; false; }
	# a fresh daemon checks them from the action cache's records
	"$KILN" stop
	printf 'part three\n' >inc/part.h
	build_ok
	expect_ran "included.txt"
	[ "$(cat build/default/included.txt)" = "part three" ]
	build_ok
	expect_ran ""
}

@test "an empty source folder is fine (and a file appearing in it reloads the project)" {
	write_project
	mkdir -p src/empty
	build_ok
	build_ok
	expect_ran ""
	printf 'charlie\n' >src/empty/c.txt
	# not matched by src/*.txt, but the folder's names changed: a reload,
	# and nothing to run
	build_ok
	expect_ran ""
	run "$KILN" status
	[ "$status" -eq 0 ]
}

@test "scratch folders are reused, and a run never sees what an earlier run left in its folder" {
	mkdir -p src
	for i in 1 2 3 4; do printf 'extra %s\n' "$i" >src/extra-$i.dat; done
	printf 'seed\n' >src/seed.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles: { default: }
tools:
  # leaves a file beside its output: its folder must not be reused
  litter: { run: [sh, -c, 'cp "$0" "$1" && echo junk > "$(dirname "$1")/junk"', "${in}", "${out}"] }
  # records its folder's number and listing, and reads an undeclared file
  look:
    run: [sh, -c, 'd=$(dirname "$0"); { basename "$d"; ls -A "$d"; cat "src/extra-$1.dat"; } > "$0"', "${out}", "${param.n}"]
assets:
  - { url: litter.txt, tool: litter, inputs: [src/seed.txt] }
  - { url: look-1.txt, tool: look, inputs: ["@litter.txt"], params: { n: "1" } }
  - { url: look-2.txt, tool: look, inputs: ["@litter.txt"], params: { n: "2" } }
  - { url: look-3.txt, tool: look, inputs: ["@litter.txt"], params: { n: "3" } }
  - { url: look-4.txt, tool: look, inputs: ["@litter.txt"], params: { n: "4" } }
YAML
	build_ok -j 1
	expect_ran "litter.txt look-1.txt look-2.txt look-3.txt look-4.txt"
	for i in 1 2 3 4; do
		# only its own output in its folder: not the junk, not another's
		[ "$(sed -n 2,99p build/default/look-$i.txt)" = "$(printf 'look-%s.txt\nextra %s' "$i" "$i")" ] ||
			{ cat build/default/look-$i.txt; false; }
	done
	# (no bound on how many folders the four runs used: -j 1 bounds the
	# tools running, not the steps being finished, and a loaded machine
	# may still be storing three runs' outputs when the fifth tool starts;
	# reuse is checked below, where only one run is in flight)
	# each run's trace is its own: look-2 read extra-2 only
	run "$KILN" deps look-2.txt
	[ "$status" -eq 0 ]
	[[ "$output" == *"src/extra-2.dat"* ]] || { echo "$output"; false; }
	[[ "$output" != *"src/extra-1.dat"* ]] || { echo "$output"; false; }
	# nothing is left in the daemon run's area of .kiln/scratch but
	# folders ready for reuse
	[ -z "$(find .kiln/scratch -mindepth 3)" ] || { find .kiln/scratch; false; }
	kept=$(ls .kiln/scratch/*/ | grep -x '[0-9]*' | sort)
	[ -n "$kept" ] || { find .kiln/scratch; false; }
	# the trace decides reruns per run too: extra-1 changing reruns look-1 only
	printf 'extra one\n' >src/extra-1.dat
	build_ok -j 1
	expect_ran "look-1.txt"
	# and that run, the only one, took a kept folder instead of a new one
	used=$(head -n 1 build/default/look-1.txt)
	printf '%s\n' "$kept" | grep -qx "$used" ||
		{ echo "look-1 ran in folder $used; kept were:" $kept; false; }
}

@test "removing .kiln/scratch under the running daemon fails no step; its logs and traces still work" {
	write_project
	build_ok
	# the daemon keeps emptied scratch folders (and their open logs) for
	# reuse: each now is gone
	rm -rf .kiln/scratch
	printf 'alpha two\n' >src/a.txt
	printf 'bravo two\n' >src/b.txt
	build_ok
	expect_ran "all.txt copy/a.txt copy/b.txt first-upper.txt first.txt greet.txt marked.txt"
	[ "$(cat build/default/copy/a.txt)" = "alpha two" ]
	# the run's log and trace were kept where kiln log and kiln deps read them
	run "$KILN" log greet.txt
	[ "$status" -eq 0 ]
	run "$KILN" why first.txt
	[ "$status" -eq 0 ]
	[[ "$output" == *"traced: yes"* ]] || { echo "$output"; false; }
	rm -rf .kiln/scratch
	printf 'bravo three\n' >src/b.txt
	build_ok
	expect_ran "all.txt copy/b.txt greet.txt marked.txt"
}

# The policy (SCHED_OTHER 0, SCHED_BATCH 3) each tool ran under.
write_policy_project() {
	mkdir -p src
	printf 'x\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  policy: { run: [sh, -c, 'cut -d" " -f41 /proc/$$/stat > "$0"', "${out}", "${in}"] }
assets:
  - url: policy.txt
    tool: policy
    inputs: [src/a.txt]
YAML
}

@test "tools run under the daemon's own scheduling policy, not its workers' SCHED_BATCH" {
	write_policy_project
	# the daemon started under the normal policy, whatever the test's own
	# (make test run under chrt --batch or a batch-class CI job)
	run chrt --other 0 "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(cat build/default/policy.txt)" = 0 ]
	# the workers that start tools do run SCHED_BATCH (else this proves nothing)
	pid=$(cat .kiln/kilnd.pid)
	batch=$(for t in /proc/"$pid"/task/*; do sed 's/^.*) //' "$t/stat" | cut -d' ' -f39; done | grep -cx 3)
	[ "$batch" -ge 1 ] || { echo "no SCHED_BATCH thread in kilnd"; false; }
	# a daemon started under another policy keeps it for its tools
	"$KILN" stop
	printf 'y\n' >src/a.txt
	run chrt --batch 0 "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(cat build/default/policy.txt)" = 3 ]
}

@test "a tool printing megabytes keeps the head and the tail of its log, and says what was cut" {
	mkdir -p src
	printf 'x\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  chatty:
    run: "echo first; yes middle | head -n 700000; echo last; cp ${in} ${out}"
    shell: true
assets:
  - { url: out.txt, tool: chatty, inputs: [src/a.txt] }
YAML
	build_ok
	run "$KILN" log out.txt
	[ "$status" -eq 0 ]
	n=$(printf '%s\n' "$output" | wc -c)
	# 4.9 MB printed; 2 MiB and a line kept
	[ "$n" -lt 2200000 ] || { echo "the log holds $n bytes"; false; }
	[ "$(printf '%s\n' "$output" | head -n 1)" = first ]
	[ "$(printf '%s\n' "$output" | tail -n 1)" = last ]
	[[ "$output" == *"bytes of the tool's output cut here"* ]]
}

gone_now() {
	! running "$1"
}
