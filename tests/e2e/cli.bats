#!/usr/bin/env bats
# The CLI's common ground (README "The CLI"): -C DIR on the daemon
# commands, the project found in a parent folder, a clear refusal outside
# any project (no daemon started there), and kiln --help listing every
# command of the command table with an example.

bats_require_minimum_version 1.5.0

load daemon_helpers

# A project in $P with one copy step, and a sub-folder to run from.
write_project() {
	mkdir -p src deep/er
	echo a >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: c
sources: [src]
profiles:
  pc:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
rules:
  - { match: "src/*.txt", url: "t/${match.name}", outputs: "${match.name}.txt", tool: copy }
YAML
}

@test "kiln status -C DIR and kiln stop -C DIR act on that project's daemon, from elsewhere" {
	write_project
	cd "$BATS_TEST_TMPDIR"
	run "$KILN" status -C "$P" --json
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(json_field project "$output")" = "$P" ]
	[ -f "$P/.kiln/kilnd.pid" ]
	pid=$(cat "$P/.kiln/kilnd.pid")
	# nothing started where we stand
	[ ! -e "$BATS_TEST_TMPDIR/.kiln" ]
	run "$KILN" stop -C "$P"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$output" = "stopped kilnd (pid $pid)" ]
	[ ! -e "$P/.kiln/kilnd.pid" ]
	run "$KILN" stop --project "$P"
	[ "$status" -eq 0 ]
	[[ "$output" == *"no daemon is running for this project"* ]]
	run "$KILN" status -C "$BATS_TEST_TMPDIR/no-such-folder"
	[ "$status" -eq 2 ]
	[[ "$output" == *"no-such-folder: No such file or directory"* ]]
	cd "$P"
}

@test "a command run in a sub-folder finds kiln.yaml in a parent folder, as git does" {
	write_project
	cd deep/er
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ -f "$P/build/pc/t/a.txt" ]
	[ ! -e .kiln ] && [ ! -e build ]
	run "$KILN" status --json
	[ "$(json_field project "$output")" = "$P" ]
	cd "$P"
}

@test "outside any project a daemon command says there is none, exits 2 and starts nothing" {
	rm kiln.yaml
	d=$P
	while [ "$d" != / ]; do
		[ ! -e "$d/kiln.yaml" ] || skip "$d holds a kiln.yaml"
		d=$(dirname "$d")
	done
	[ ! -e /kiln.yaml ] || skip "/ holds a kiln.yaml"
	for cmd in status build events watch "why t/a" graph; do
		run --separate-stderr "$KILN" $cmd
		[ "$status" -eq 2 ] || { echo "kiln $cmd: status $status: $stderr"; false; }
		[[ "$stderr" == *"kiln: ${cmd% *}: no kiln.yaml in $P or any folder above it: not in a kiln project (cd into one, or give -C DIR)"* ]] ||
			{ echo "kiln $cmd: $stderr"; false; }
	done
	[ ! -e .kiln ] || { ls -la .kiln; false; }
	# the store commands still work on a plain folder's store
	echo x >f
	run "$KILN" put f
	[ "$status" -eq 0 ]
}

@test "kiln --help lists every command of the command table, each with an example" {
	names=$(sed -n 's/^	{"\([a-z]*\)", cmd_[a-z_]*,.*/\1/p' "$KILN_TOP/client/main.c")
	[ "$(printf '%s\n' "$names" | wc -l)" -ge 20 ] || { echo "table: $names"; false; }
	run "$KILN" --help
	[ "$status" -eq 0 ]
	for n in $names; do
		printf '%s\n' "$output" | grep -qE "^  $n +[a-z]" || { echo "'$n' not listed"; echo "$output"; false; }
		# the line after its summary is an example using it
		printf '%s\n' "$output" | grep -A1 -E "^  $n +[a-z]" | tail -n 1 |
			grep -qE "^ +e\.g\. (kiln|\"\\\$KILN\") $n( |$)" ||
			{ echo "no example for '$n'"; echo "$output"; false; }
		run "$KILN" help "$n"
		[ "$status" -eq 0 ] || { echo "kiln help $n: $output"; false; }
		run "$KILN" --help
	done
}
