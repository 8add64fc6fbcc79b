#!/usr/bin/env bats
# The timeline of a build (docs/build.md, "The timeline of a build"): every
# build the real kilnd runs leaves a Chrome trace-event file in
# .kiln/traces/, and `kiln trace` prints the last one or a named one. The
# files are read with python3's json module, not with kiln's code.

bats_require_minimum_version 1.5.0

load daemon_helpers

# Four copies, a failing step, a level that `kiln need`s two of them, and two steps that
# must overlap: marker runs from when it sees peer until peer has gone;
# peer runs until it has seen marker (each gives up after 60 s, and then
# says so in its output).
write_project() {
	mkdir -p src
	for i in 1 2 3 4; do echo "$i" >"src/$i.txt"; done
	printf '1\n2\n' >src/one.lvl
	cat >kiln.yaml <<'YAML'
kiln: 1
project: tl
sources: [src]
profiles:
  pc:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  fail: { run: [sh, -c, "echo bad >&2; exit 3"] }
  lvl:
    run: 'for t in $(cat ${in}); do p=$("$KILN" need "c/$t.txt") || exit 1; cat "$p"; done > ${out}'
    shell: true
  peer:
    run: ': kiln-tl-peer; for i in $(seq 1200); do pgrep -f "[k]iln-tl-marker" >/dev/null && break; sleep 0.05; done; if pgrep -f "[k]iln-tl-marker" >/dev/null; then echo together; else echo alone; fi > ${out}'
    shell: true
  marker:
    run: 'sh -c "for i in \$(seq 1200); do pgrep -f \"[k]iln-tl-peer\" >/dev/null && break; sleep 0.05; done; for i in \$(seq 200); do pgrep -f \"[k]iln-tl-peer\" >/dev/null || break; sleep 0.05; done" kiln-tl-marker; echo marker > ${out}'
    shell: true
rules:
  - match: "src/*.txt"
    url: "c/${match.name}.txt"
    tool: copy
assets:
  - url: level
    tool: lvl
    inputs: [src/one.lvl]
  - url: pair/peer
    tool: peer
    inputs: [src/1.txt]
  - url: pair/marker
    tool: marker
    inputs: [src/2.txt]
  - url: broken
    tool: fail
    inputs: [src/1.txt]
YAML
}

# slices FILE: "tid url decision" per step slice (cat "step"), sorted.
slices() {
	python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rows = sorted("%d %s %s" % (e["tid"], e["args"]["url"], e["args"]["decision"])
              for e in d["traceEvents"] if e["ph"] == "X" and e.get("cat") == "step")
print("\n".join(rows))
PY
}

# urls FILE: the sorted URLs of its step slices, space-separated.
urls() {
	slices "$1" | awk '{print $2}' | sort | tr '\n' ' ' | sed 's/ $//'
}

# ran_urls: the sorted URLs that ran, from kiln build --json in $output.
ran_urls() {
	printf '%s\n' "$output" | grep '"event":"step"' | grep '"result":"ran"' |
		sed 's/.*"url":"\([^"]*\)".*/\1/' | sort | tr '\n' ' ' | sed 's/ $//'
}

@test "a build's trace is JSON with one slice per step that ran, none for steps up to date" {
	write_project
	run --separate-stderr "$KILN" build --json c/1.txt c/2.txt c/3.txt
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ -f .kiln/traces/1.json ]
	"$KILN" trace -o first.json
	[ "$(urls first.json)" = "$(ran_urls)" ] || { slices first.json; echo "ran: $(ran_urls)"; false; }
	[ "$(urls first.json)" = "c/1.txt c/2.txt c/3.txt" ]
	# the build's own slice counts what ran and what was up to date
	echo changed >src/3.txt
	run --separate-stderr "$KILN" build --json c/1.txt c/2.txt c/3.txt
	[ "$status" -eq 0 ]
	"$KILN" trace >second.json
	[ "$(urls second.json)" = "c/3.txt" ] || { slices second.json; false; }
	python3 - second.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
b = [e for e in d["traceEvents"] if e["ph"] == "X" and e.get("cat") == "build"]
assert len(b) == 1, b
a = b[0]["args"]
assert (a["build"], a["total"], a["ran"], a["reused"]) == (2, 3, 1, 2), a
s = [e for e in d["traceEvents"] if e["ph"] == "X" and e.get("cat") == "step"][0]
assert s["args"]["reason"], s
assert s["ts"] >= 0 and s["dur"] > 0, s
names = {e["tid"]: e["args"]["name"] for e in d["traceEvents"]
         if e["ph"] == "M" and e["name"] == "thread_name"}
assert names[0] == "build" and names[s["tid"]] == "slot 1", names
PY
}

@test "kiln trace BUILD prints that build's trace; an unknown build is an error" {
	write_project
	"$KILN" build c/1.txt >/dev/null
	"$KILN" build c/2.txt >/dev/null
	run --separate-stderr "$KILN" trace 1
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" >one.json
	[ "$(urls one.json)" = "c/1.txt" ]
	run --separate-stderr "$KILN" trace
	printf '%s\n' "$output" >last.json
	[ "$(urls last.json)" = "c/2.txt" ]
	run --separate-stderr "$KILN" trace 77
	[ "$status" -eq 1 ]
	[ -z "$output" ]
	[[ "$stderr" == *"no trace of build 77"* ]] || { echo "$stderr"; false; }
	run --separate-stderr "$KILN" trace ../../etc/passwd
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"BUILD is a build number"* ]] || { echo "$stderr"; false; }
}

@test "kiln trace before any build says there is none" {
	write_project
	run --separate-stderr "$KILN" trace
	[ "$status" -eq 1 ]
	[[ "$stderr" == *"no build has left a trace yet"* ]] || { echo "$stderr"; false; }
}

@test "only the last 20 builds' traces are kept, and no temp file stays" {
	write_project
	for i in $(seq 1 23); do
		echo "v$i" >src/4.txt
		"$KILN" build c/4.txt >/dev/null
	done
	run ls .kiln/traces
	[ "$(ls .kiln/traces | grep -c '\.json$')" -eq 20 ] || { echo "$output"; false; }
	[ ! -e .kiln/traces/1.json ] && [ ! -e .kiln/traces/3.json ]
	[ -e .kiln/traces/4.json ] && [ -e .kiln/traces/23.json ]
	[ "$(readlink .kiln/traces/last)" = 23.json ]
	[ -z "$(ls -A .kiln/traces | grep '^\.tmp-')" ] || { ls -A .kiln/traces; false; }
}

@test "steps running at once get lanes of their own, named as slots" {
	write_project
	run --separate-stderr "$KILN" build -j 2 pair/peer pair/marker
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(cat build/pc/pair/peer)" = together ]
	"$KILN" trace >t.json
	python3 - t.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
steps = [e for e in ev if e["ph"] == "X" and e.get("cat") == "step"]
assert len(steps) == 2, steps
assert steps[0]["tid"] != steps[1]["tid"], steps
names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
assert sorted(names[s["tid"]] for s in steps) == ["slot 1", "slot 2"], names
PY
}

@test "a step waiting on kiln need shows its waits and what it needed" {
	write_project
	run --separate-stderr "$KILN" build -j 1 level
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	"$KILN" trace >t.json
	[ "$(urls t.json)" = "c/1.txt c/2.txt level" ] || { slices t.json; false; }
	python3 - t.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
lvl = [e for e in ev if e["ph"] == "X" and e.get("cat") == "step" and e["name"] == "level"][0]
assert lvl["args"]["needs"] == ["c/1.txt", "c/2.txt"], lvl
waits = [e for e in ev if e["ph"] == "X" and e.get("cat") == "need"]
assert len(waits) == 2, waits
for w in waits:
    assert w["tid"] == lvl["tid"] and w["args"]["url"] == "level", w
    assert lvl["ts"] <= w["ts"] and w["ts"] + w["dur"] <= lvl["ts"] + lvl["dur"] + 1, (w, lvl)
PY
}

@test "a failed step's slice says so, with its error" {
	write_project
	run --separate-stderr "$KILN" build broken
	[ "$status" -ne 0 ]
	"$KILN" trace >t.json
	[ "$(slices t.json)" = "1 broken failed" ] || { slices t.json; false; }
	python3 - t.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = [e for e in d["traceEvents"] if e["ph"] == "X" and e.get("cat") == "step"][0]
assert "exit" in s["args"]["error"] or "3" in s["args"]["error"], s
PY
}

@test "a URL and a tool message that are not UTF-8 still make a trace that parses (U+FFFD, kiln's JSON policy)" {
	mkdir -p src
	printf 'y\n' >"$(printf 'src/b\377d.txt')"
	cat >kiln.yaml <<'YAML'
kiln: 1
project: tl8
sources: [src]
profiles:
  pc:
tools:
  copy: { run: [sh, -c, 'printf "caf\351 \342\200" >&2; exit 3', "${in}", "${out}"] }
rules:
  - { match: "src/*.txt", url: "c/${match.name}", outputs: "${match.name}.txt", tool: copy }
YAML
	run "$KILN" build
	[ "$status" -eq 1 ] || { echo "$output"; false; }
	run python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(ascii(sorted(e["args"]["url"] for e in d["traceEvents"] if e["ph"]=="X" and e.get("cat")=="step")))' .kiln/traces/last
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$output" = "['c/b\ufffdd']" ] || { echo "$output"; false; }
}

# many_steps N: a project of N copies, c/1.txt .. c/N.txt.
many_steps() {
	mkdir -p src
	for i in $(seq 1 "$1"); do echo "$i" >"src/$i.txt"; done
	cat >kiln.yaml <<'YAML'
kiln: 1
project: tlmany
sources: [src]
profiles:
  pc:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
rules:
  - { match: "src/*.txt", url: "c/${match.name}.txt", tool: copy }
YAML
}

@test "16 clients building at once: every build's trace is its own, whole JSON, and last names the newest" {
	many_steps 160
	"$KILN" status >/dev/null
	# each client its own ten steps: the builds overlap and end apart
	pids=""
	for i in $(seq 1 16); do
		"$KILN" build --json $(for k in $(seq "$i" 16 160); do echo "c/$k.txt"; done) \
			>"out.$i" 2>"err.$i" &
		pids="$pids $!"
	done
	for p in $pids; do
		wait "$p" || { echo "a client failed:"; cat err.*; false; }
	done
	ids=""
	for i in $(seq 1 16); do
		id=$(jq -r 'select(.event == "build") | .build' "out.$i")
		[ -n "$id" ] || { echo "no summary in out.$i"; cat "out.$i" "err.$i"; false; }
		ids="$ids $id"
		[ -f ".kiln/traces/$id.json" ] || { echo "no trace of build $id"; ls -A .kiln/traces; false; }
		python3 -m json.tool ".kiln/traces/$id.json" >/dev/null ||
			{ echo "trace of build $id is not JSON"; false; }
	done
	[ "$(printf '%s\n' $ids | sort -u | wc -l)" -eq 16 ] || { echo "ids:$ids"; false; }
	! grep 'writing the trace' .kiln/kilnd.log || false
	[ "$(readlink .kiln/traces/last)" = "$(ls -t .kiln/traces | grep '\.json$' | head -n 1)" ] ||
		{ ls -lt --full-time .kiln/traces; false; }
	[ -z "$(ls -A .kiln/traces | grep '^\.tmp-')" ] || { ls -A .kiln/traces; false; }
}

@test "a restarted daemon numbers its builds after the last trace: no trace is replaced" {
	write_project
	"$KILN" build c/1.txt >/dev/null
	"$KILN" build c/2.txt >/dev/null
	"$KILN" stop >/dev/null
	run --separate-stderr "$KILN" build --json c/3.txt
	[ "$status" -eq 0 ] || { echo "$output $stderr"; false; }
	[ "$(printf '%s\n' "$output" | jq -r 'select(.event == "build") | .build')" = 3 ] || { echo "$output"; false; }
	[ "$(urls .kiln/traces/1.json)" = "c/1.txt" ] && [ "$(urls .kiln/traces/2.json)" = "c/2.txt" ]
	[ "$(urls .kiln/traces/3.json)" = "c/3.txt" ] || { slices .kiln/traces/3.json; false; }
	[ "$(readlink .kiln/traces/last)" = 3.json ]
}

@test "a crashed daemon's temp files are removed at a build's end; this daemon's are not another build's to remove" {
	write_project
	mkdir -p .kiln/traces
	: >.kiln/traces/.tmp-999999999-5.json
	: >.kiln/traces/.tmp-last-999999999-5.json
	"$KILN" build c/1.txt >/dev/null
	[ -z "$(ls -A .kiln/traces | grep '^\.tmp-')" ] || { ls -A .kiln/traces; false; }
	pid=$(daemon_pid)
	: >".kiln/traces/.tmp-$pid-77.json"
	"$KILN" build c/2.txt >/dev/null
	[ -e ".kiln/traces/.tmp-$pid-77.json" ] || { ls -A .kiln/traces; false; }
}
