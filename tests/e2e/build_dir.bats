#!/usr/bin/env bats
# build_dir.bats — at the end of every build, build/<profile>/ holds
# exactly what kiln-index.txt lists for the steps the loaded project has
# (docs/build.md, "What build/ holds"): a removed step's outputs go, even
# when the build was for one URL (what editors run), had a failure, was
# started by kiln watch, or came from a daemon started afresh; a failing
# step keeps its last good output, and the map lists it.

bats_require_minimum_version 1.5.0

load daemon_helpers

project() {
	mkdir -p src
	printf 'a\n' >src/a.txt
	printf 'b\n' >src/b.txt
	printf 'c\n' >src/c.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  pc: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  pair: { shell: true, run: 'cp "${in}" "${out.one}"; cp "${in}" "${out.two}"' }
assets:
  - { url: a.txt, tool: copy, inputs: [src/a.txt] }
  - { url: b.txt, tool: copy, inputs: [src/b.txt] }
  - { url: sub/c.txt, tool: copy, inputs: [src/c.txt] }
  - { url: dup, tool: pair, inputs: [src/c.txt], outputs: { one: one.txt, two: two.txt } }
YAML
}

# drop URL: take the asset URL out of kiln.yaml.
drop() {
	grep -v "url: $1," kiln.yaml >kiln.yaml.new
	mv kiln.yaml.new kiln.yaml
}

build_ok() {
	run "$KILN" build "$@"
	[ "$status" -eq 0 ] || { echo "status $status: $output"; false; }
}

# files: every file under build/pc/ but the map, sorted, one line.
files() {
	(cd build/pc && find . -type f ! -name kiln-index.txt | sed 's|^\./||' | sort | tr '\n' ' ')
}

# listed: the map's files (fourth field), sorted, one line.
listed() {
	tail -n +2 build/pc/kiln-index.txt | cut -f4 | sort | tr '\n' ' '
}

# exact: build/pc/ holds what the map lists, and nothing else.
exact() {
	[ "$(files)" = "$(listed)" ] ||
		{ echo "build/pc: $(files)"; echo "the map:  $(listed)"; false; }
}

@test "a removed asset's output leaves build/ at the end of a build of another URL" {
	project
	build_ok
	[ -f build/pc/b.txt ]
	drop b.txt
	build_ok a.txt
	[ ! -e build/pc/b.txt ] || { echo "b.txt still in build/"; false; }
	! grep -q '^b\.txt' build/pc/kiln-index.txt
	[ "$(files)" = "a.txt one.txt sub/c.txt two.txt " ] || { echo "$(files)"; false; }
	exact
	# and the folder it leaves empty goes too
	drop sub/c.txt
	build_ok a.txt
	[ ! -e build/pc/sub ] || { find build/pc/sub; false; }
	exact
}

@test "a later full build after a targeted one removes them too" {
	project
	build_ok
	build_ok a.txt      # the map written, nothing to prune yet
	drop b.txt
	build_ok a.txt
	build_ok
	[ ! -e build/pc/b.txt ]
	exact
}

@test "a build for one URL by a daemon started afresh lists every step, not only its own" {
	project
	build_ok
	before=$(cat build/pc/kiln-index.txt)
	"$KILN" stop
	build_ok a.txt
	[ "$(cat build/pc/kiln-index.txt)" = "$before" ] ||
		{ echo "before:"; echo "$before"; echo "after:"; cat build/pc/kiln-index.txt; false; }
	exact
}

@test "an asset removed while no daemon ran leaves build/ at the new daemon's first build" {
	project
	build_ok
	"$KILN" stop
	drop b.txt
	drop dup
	build_ok a.txt
	[ "$(files)" = "a.txt sub/c.txt " ] || { echo "$(files)"; false; }
	exact
}

@test "a renamed output's old file goes; a stray file in build/ goes at the next load" {
	project
	build_ok
	sed -i 's/two: two.txt/two: deux.txt/' kiln.yaml
	echo stray >build/pc/stray.bin
	build_ok b.txt
	[ ! -e build/pc/two.txt ] && [ ! -e build/pc/stray.bin ] || { echo "$(files)"; false; }
	# deux.txt was not built by that build: not listed, not there
	exact
	build_ok
	[ "$(cat build/pc/deux.txt)" = "c" ]
	exact
}

@test "a build with a failing step still removes dead files; the failing step keeps its last good output, listed" {
	project
	build_ok
	h=$(awk -F'\t' '$1 == "a.txt" { print $2 }' build/pc/kiln-index.txt)
	[ -n "$h" ]
	drop b.txt
	# a.txt now fails: the tool leaves nothing
	sed -i 's|{ url: a.txt, tool: copy, inputs: \[src/a.txt\] }|{ url: a.txt, tool: fail, inputs: [src/a.txt] }|' kiln.yaml
	sed -i 's|^tools:|tools:\n  fail: { run: [sh, -c, "exit 3"] }|' kiln.yaml
	run "$KILN" build
	[ "$status" -ne 0 ] || { echo "the build did not fail: $output"; false; }
	[ ! -e build/pc/b.txt ] || { echo "b.txt still in build/"; false; }
	[ "$(cat build/pc/a.txt)" = "a" ]
	[ "$(awk -F'\t' '$1 == "a.txt" { print $2 }' build/pc/kiln-index.txt)" = "$h" ] ||
		{ cat build/pc/kiln-index.txt; false; }
	exact
	# the same after a restart, and for a build of another URL
	"$KILN" stop
	build_ok sub/c.txt
	[ "$(awk -F'\t' '$1 == "a.txt" { print $2 }' build/pc/kiln-index.txt)" = "$h" ] ||
		{ cat build/pc/kiln-index.txt; false; }
	exact
}

@test "a step that never built is not listed, and nothing of it is in build/" {
	project
	sed -i 's|^tools:|tools:\n  fail: { run: [sh, -c, "exit 3"] }|' kiln.yaml
	printf '  - { url: never.txt, tool: fail, inputs: [src/a.txt] }\n' >>kiln.yaml
	run "$KILN" build
	[ "$status" -ne 0 ]
	! grep -q '^never\.txt' build/pc/kiln-index.txt
	exact
}

@test "kiln watch of one URL: an asset removed meanwhile leaves build/ and the map" {
	project
	build_ok
	W="$BATS_TEST_TMPDIR/watch.out"
	"$KILN" watch --json a.txt >"$W" 2>"$W.err" &
	watch_pid=$!
	wait_for grep -q '"event":"build"' "$W" || { cat "$W" "$W.err"; kill "$watch_pid"; false; }
	drop b.txt
	gone() { [ ! -e build/pc/b.txt ] && ! grep -q '^b\.txt' build/pc/kiln-index.txt; }
	wait_for gone || { cat "$W" "$W.err"; kill -INT "$watch_pid"; false; }
	kill -INT "$watch_pid"
	wait "$watch_pid" || true
	exact
}

@test "builds ending together while the project was reloaded lose none of their outputs" {
	project
	for i in $(seq 1 12); do
		printf 'x%s\n' "$i" >"src/x$i.txt"
		printf '  - { url: "d%s/x.txt", tool: copy, inputs: [src/x%s.txt] }\n' "$i" "$i" >>kiln.yaml
	done
	build_ok
	for round in 1 2 3; do
		# a reload (prune due) and new bytes for every step, then one
		# build per URL at once: each prune runs while others put files
		for i in $(seq 1 12); do printf 'r%s %s\n' "$round" "$i" >"src/x$i.txt"; done
		printf '# round %s\n' "$round" >>kiln.yaml
		pids=()
		for i in $(seq 1 12); do
			"$KILN" build "d$i/x.txt" >/dev/null 2>&1 &
			pids+=($!)
		done
		for p in "${pids[@]}"; do wait "$p"; done
		for i in $(seq 1 12); do
			[ "$(cat "build/pc/d$i/x.txt")" = "r$round $i" ] ||
				{ echo "round $round: d$i/x.txt: $(cat "build/pc/d$i/x.txt" 2>&1)"; false; }
		done
	done
	build_ok
	exact
}

@test "an output edited in build/ and put back says so, in the build's output and kiln why; a missing one does not" {
	project
	build_ok
	chmod u+w build/pc/a.txt
	printf 'EDITED\n' >build/pc/a.txt
	rm build/pc/b.txt
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(cat build/pc/a.txt)" = "a" ] && [ "$(cat build/pc/b.txt)" = "b" ]
	[[ "$output" == *"a.txt: up to date; build/pc/a.txt was edited in build/: restored from the store"* ]] ||
		{ echo "$output"; false; }
	[[ "$output" != *"b.txt was edited"* ]] || { echo "$output"; false; }
	run "$KILN" why a.txt
	[[ "$output" == *"build/pc/a.txt was edited in build/: restored from the store"* ]] ||
		{ echo "$output"; false; }
	run "$KILN" why b.txt
	[[ "$output" != *"edited"* ]] || { echo "$output"; false; }
	# a daemon started afresh finds the edit by the store's files record
	printf 'EDITED AGAIN\n' >build/pc/a.txt
	"$KILN" stop
	run "$KILN" build --json
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	printf '%s\n' "$output" | grep '"url":"a.txt"' |
		grep -q 'build/pc/a.txt was edited in build/: restored from the store' ||
		{ echo "$output"; false; }
	[ "$(cat build/pc/a.txt)" = "a" ]
	run "$KILN" why a.txt
	[[ "$output" == *"was edited in build/"* ]] || { echo "$output"; false; }
}
