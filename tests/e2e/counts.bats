#!/usr/bin/env bats
# counts.bats — a build's summary counts what its own step events said
# (docs/build.md, "Checking the summary against the step events"):
# tests/run.sh exports KILN_CHECK_COUNTS=1, with which kiln build tallies
# each step's last event for its build and exits 3, saying what differs,
# when the summary counts otherwise. These cases set it themselves and
# drive the builds whose counts disagreed: steps decided again after
# their run (an input rewritten mid-build, blobs deleted between builds)
# and a build joining steps another build had finished.

bats_require_minimum_version 1.5.0

load daemon_helpers

# Six copies and a gate step that waits (at most 30 s) for the file
# $GATE (gate.open in the project, outside its sources), so that a build can be held open while the test edits files.
write_project() {
	mkdir -p src
	for i in 1 2 3 4 5 6; do echo "file $i" >"src/$i.txt"; done
	echo gate >src/gate.in
	cat >kiln.yaml <<'YAML'
kiln: 1
project: counts
sources: [src]
profiles:
  pc:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  gate:
    run: 'i=0; while [ ! -e GATEPATH ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done; [ -e GATEPATH ] && cp ${in} ${out}'
    shell: true
rules:
  - match: "src/*.txt"
    url: "c/${match.name}.txt"
    tool: copy
assets:
  - url: gate
    tool: gate
    inputs: [src/gate.in]
YAML
	GATE="$P/gate.open"
	sed -i "s|GATEPATH|$GATE|g" kiln.yaml
	export KILN_CHECK_COUNTS=1
}

# copies_done: build/pc/c/ holds the six copies.
copies_done() {
	[ "$(ls build/pc/c 2>/dev/null | wc -l)" -eq 6 ]
}

# rewrite_sources: write every source copy again with the same bytes (an
# edit while a build runs: its steps are decided again, and found up to
# date), then give the daemon's watch a moment to see it before the gate
# opens. (Only makes the re-decision likely on a loaded machine; the
# counts must agree either way.)
rewrite_sources() {
	local f c
	for f in src/*.txt; do
		c=$(cat "$f")
		printf '%s\n' "$c" >"$f"
	done
	sleep 1
}

# summary FILE FIELD: that field of the build's summary in a --json output.
summary() {
	jq -r "select(.event == \"build\") | .$2" "$1"
}

# ran_events FILE: how many steps' last event in FILE said ran.
ran_events() {
	jq -r 'select(.event == "step") | .url + " " + .result' "$1" |
		awk '{ last[$1] = $2 } END { n = 0; for (u in last) if (last[u] == "ran") n++; print n }'
}

# expect_agree FILE STATUS: the build exited 0 and its summary's ran is
# the count of steps whose last event said ran.
expect_agree() {
	[ "$2" -eq 0 ] || { echo "kiln build exited $2"; cat "$1" "$1.err"; false; }
	[ "$(summary "$1" ran)" = "$(ran_events "$1")" ] ||
		{ echo "summary ran $(summary "$1" ran), events $(ran_events "$1")"; cat "$1"; false; }
}

@test "a fresh build whose inputs are rewritten (same bytes) while it runs counts every step that ran as ran" {
	write_project
	"$KILN" build --json >b.out 2>b.out.err &
	pid=$!
	wait_for copies_done
	rewrite_sources
	touch "$GATE"
	st=0
	wait "$pid" || st=$?
	expect_agree b.out "$st"
	[ "$(summary b.out ran)" -eq 7 ] || { cat b.out; false; }
}

@test "blobs deleted between builds: steps run again, are decided again mid-build, and the summary counts them as ran" {
	write_project
	touch "$GATE"
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	rm -f "$GATE"
	chmod -R u+w .kiln/store/objects
	find .kiln/store/objects -type f -delete
	rm -rf build
	"$KILN" build --json >b.out 2>b.out.err &
	pid=$!
	wait_for copies_done
	rewrite_sources
	touch "$GATE"
	st=0
	wait "$pid" || st=$?
	expect_agree b.out "$st"
	[ "$(summary b.out ran)" -eq 7 ] || { cat b.out; false; }
}

@test "blobs and build/ deleted between builds, again and again: each build's summary counts what its events said" {
	write_project
	touch "$GATE"
	for round in 1 2 3; do
		chmod -R u+w .kiln/store/objects 2>/dev/null || true
		find .kiln/store/objects -type f -delete 2>/dev/null || true
		rm -rf build
		st=0
		"$KILN" build --json >"b$round.out" 2>"b$round.out.err" || st=$?
		expect_agree "b$round.out" "$st"
	done
}

@test "a build joining steps another build finished is told their results and counts them so" {
	write_project
	"$KILN" build --json >a.out 2>a.out.err &
	pid=$!
	wait_for copies_done
	run --separate-stderr "$KILN" build --json c/1.txt c/2.txt
	[ "$status" -eq 0 ] || { echo "$output"; echo "$stderr"; false; }
	printf '%s\n' "$output" >j.out
	[ "$(summary j.out ran)" = "$(ran_events j.out)" ] || { cat j.out; false; }
	[ "$(jq -r 'select(.event == "step") | .url' j.out | sort | tr '\n' ' ')" = "c/1.txt c/2.txt " ] ||
		{ cat j.out; false; }
	touch "$GATE"
	st=0
	wait "$pid" || st=$?
	expect_agree a.out "$st"
}

@test "KILN_CHECK_COUNTS is off by default and reports nothing on an agreeing build" {
	write_project
	touch "$GATE"
	run --separate-stderr env -u KILN_CHECK_COUNTS "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	run --separate-stderr "$KILN" build --json
	[ "$status" -eq 0 ] && [ -z "$stderr" ] || { echo "$output $stderr"; false; }
}
