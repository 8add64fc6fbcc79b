#!/usr/bin/env bats
# json.bats — every --json output is valid JSON, also for a file name that
# is not UTF-8: such a byte comes out as U+FFFD and the object holding the
# field says "<field>_replaced": true (docs/protocol.md, "JSON output").

bats_require_minimum_version 1.5.0

load daemon_helpers

# A project with one source whose name holds the byte 0xff.
write_project() {
	mkdir -p src
	printf 'x\n' >src/ok.txt
	printf 'y\n' >"$(printf 'src/b\377d.txt')"
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
rules:
  - match: "src/*.txt"
    url: "copy/${match.name}"
    outputs: "${match.name}.out"
    tool: copy
YAML
}

@test "kiln ls --json of a file name with invalid UTF-8 parses, replaced and flagged" {
	write_project
	run --separate-stderr "$KILN" ls --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e . >/dev/null || { echo "not JSON: $output"; false; }
	run jq -r '.steps[] | select(.url_replaced) | .url + " " + .inputs[0] + " " + (.inputs_replaced|tostring)' <<<"$output"
	[ "$output" = $'copy/b\uFFFDd src/b\uFFFDd.txt true' ] || { echo "seen: $output"; false; }
	# a valid name carries no flag
	run jq -r '[.steps[] | select(.url == "copy/ok") | has("url_replaced")] | .[0]' <<<"$("$KILN" ls --json)"
	[ "$output" = false ]
}

@test "kiln build --json and kiln events --json of such a step parse with python's json" {
	write_project
	# printed outside the project (build.out links there): a file written in
	# it while the build runs is a change, an event among the four read below
	ln -sf "$BATS_TEST_TMPDIR/build.out" build.out
	"$KILN" build --json >"$BATS_TEST_TMPDIR/build.out"
	python3 -c '
import json, sys
seen = [json.loads(l) for l in open("build.out")]
bad = [e for e in seen if e.get("url_replaced")]
assert len(bad) == 1, seen
assert bad[0]["url"] == "copy/b\ufffdd", bad[0]
assert bad[0]["outputs"][0]["path_replaced"] is True, bad[0]
assert seen[-1]["event"] == "build" and seen[-1]["ran"] == 2, seen[-1]
' || { cat -v build.out; false; }
	epoch=$("$KILN" status --json | jq -r .event_epoch)
	"$KILN" events --since "$epoch:0" --count 4 --json >events.out 3>&-
	python3 -c '
import json
seen = [json.loads(l) for l in open("events.out")]
assert any(e.get("url") == "copy/b\ufffdd" and e.get("url_replaced") for e in seen), seen
' || { cat -v events.out; false; }
}
