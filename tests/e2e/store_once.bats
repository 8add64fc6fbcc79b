#!/usr/bin/env bats
# store_once.bats — what a build costs on disk (docs/store.md, "Disk
# use"): an intermediate's bytes are kept once (its file under
# .kiln/intermediate/ is a hard link to its blob), and a failed run puts
# nothing into the store but its log.

bats_require_minimum_version 1.5.0

load daemon_helpers

# blobs: how many blobs the store holds.
blobs() {
	find .kiln/store/objects -type f | wc -l
}

@test "an intermediate of 16 MB costs 16 MB, not 32: its file is its blob" {
	mkdir -p src
	head -c $((16 << 20)) /dev/urandom >src/big.raw
	cat >kiln.yaml <<'YAML'
kiln: 1
project: im
sources: [src]
profiles:
  pc: {}
tools:
  decode: { run: [cp, "${in}", "${out}"] }
  head: { shell: true, run: 'head -c 16 "${in}" >"${out}"' }
rules:
  - { match: "src/*.raw", url: "pcm/${match.name}.pcm", tool: decode, intermediate: true }
assets:
  - { url: small.bin, tool: head, inputs: ["@pcm/big.pcm"] }
YAML
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	cmp src/big.raw .kiln/intermediate/pc/pcm/big.pcm
	# one du over both: a file linked twice is counted once
	kb=$(du -skc .kiln/store/objects .kiln/intermediate | tail -n 1 | cut -f1)
	[ "$kb" -lt $((24 << 10)) ] || { du -sk .kiln/store/objects .kiln/intermediate; echo "$kb KiB"; false; }
	[ "$(stat -c %h .kiln/intermediate/pc/pcm/big.pcm)" -ge 2 ]
	# it is still found intact: a second build, warm and cold, runs nothing
	run "$KILN" build
	[[ "$output" == *"0 ran"* ]] || { echo "$output"; false; }
	"$KILN" stop
	run "$KILN" build
	[[ "$output" == *"0 ran"* ]] || { echo "$output"; false; }
	# and fsck finds the store sound
	"$KILN" stop
	run "$KILN" fsck
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# lost, it comes back from the store the same way
	rm -rf .kiln/intermediate
	run "$KILN" build
	[[ "$output" == *"0 ran"* ]] || { echo "$output"; false; }
	cmp src/big.raw .kiln/intermediate/pc/pcm/big.pcm
	kb=$(du -skc .kiln/store/objects .kiln/intermediate | tail -n 1 | cut -f1)
	[ "$kb" -lt $((24 << 10)) ] || { echo "$kb KiB"; false; }
}

@test "a run that wrote one of its two outputs puts nothing into the store" {
	mkdir -p src
	printf 'x\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: p
sources: [src]
profiles:
  pc: {}
tools:
  ok: { run: [cp, "${in}", "${out}"] }
  half: { shell: true, run: 'head -c 100000 /dev/urandom >"${out.one}"' }
assets:
  - { url: ok.txt, tool: ok, inputs: [src/a.txt] }
  - { url: two, tool: half, inputs: [src/a.txt], outputs: { one: one.bin, two: two.bin } }
YAML
	run "$KILN" build ok.txt
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	n=$(blobs)
	run "$KILN" build two
	[ "$status" -ne 0 ] || { echo "$output"; false; }
	[[ "$output" == *"did not write its output 'two'"* ]] || { echo "$output"; false; }
	[ "$(blobs)" -eq "$n" ] || { echo "blobs: $n before, $(blobs) after"; false; }
}

@test "a tool that fails after writing part of its output puts nothing but its log into the store" {
	mkdir -p src
	printf 'x\n' >src/a.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: p
sources: [src]
profiles:
  pc: {}
tools:
  ok: { run: [cp, "${in}", "${out}"] }
  crash: { shell: true, run: 'head -c 100000 /dev/urandom >"${out}"; exit 1' }
assets:
  - { url: ok.txt, tool: ok, inputs: [src/a.txt] }
  - { url: bad.bin, tool: crash, inputs: [src/a.txt] }
YAML
	run "$KILN" build ok.txt
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	n=$(blobs)
	run "$KILN" build bad.bin
	[ "$status" -ne 0 ] || { echo "$output"; false; }
	[ "$(blobs)" -eq "$n" ] || { echo "blobs: $n before, $(blobs) after"; false; }
	[ ! -e build/pc/bad.bin ]
}

@test "an intermediate no longer described leaves .kiln/intermediate/ at the next build" {
	mkdir -p src
	printf 'one\n' >src/a.wav
	printf 'two\n' >src/b.wav
	cat >kiln.yaml <<'YAML'
kiln: 1
project: im
sources: [src]
profiles:
  pc: {}
tools:
  decode: { run: [cp, "${in}", "${out}"] }
  encode: { shell: true, run: 'rev <"${in}" >"${out}"' }
rules:
  - { match: "src/*.wav", url: "pcm/${match.name}.pcm", tool: decode, intermediate: true }
assets:
  - { url: a.ogg, tool: encode, inputs: ["@pcm/a.pcm"] }
YAML
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ -f .kiln/intermediate/pc/pcm/b.pcm ]
	rm src/b.wav
	run "$KILN" build a.ogg
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ ! -e .kiln/intermediate/pc/pcm/b.pcm ] || { find .kiln/intermediate; false; }
	[ "$(cat .kiln/intermediate/pc/pcm/a.pcm)" = "one" ]
}

@test "kill -9 of the daemon while intermediates are linked: the next build is right, fsck clean, each still kept once" {
	mkdir -p src
	for i in $(seq 1 10); do head -c $((512 << 10)) /dev/urandom >"src/s$i.raw"; done
	cat >kiln.yaml <<'YAML'
kiln: 1
project: im
sources: [src]
profiles:
  pc: {}
tools:
  decode: { shell: true, run: 'sleep 0.2; cp "${in}" "${out}"' }
  head: { shell: true, run: 'head -c 16 "${in}" >"${out}"' }
rules:
  - { match: "src/*.raw", url: "pcm/${match.name}.pcm", tool: decode, intermediate: true }
assets:
YAML
	for i in $(seq 1 10); do
		printf '  - { url: "out/s%s.bin", tool: head, inputs: ["@pcm/s%s.pcm"] }\n' "$i" "$i" >>kiln.yaml
	done
	"$KILN" build -j 2 >first.log 2>&1 &
	client=$!
	wait_for test -e .kiln/intermediate/pc/pcm/s1.pcm -o -e .kiln/intermediate/pc/pcm/s2.pcm ||
		{ cat first.log; false; }
	kill -9 "$(daemon_pid)"
	wait "$client" || true
	run "$KILN" build -j 2
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	for i in $(seq 1 10); do
		cmp "src/s$i.raw" ".kiln/intermediate/pc/pcm/s$i.pcm"
		[ "$(stat -c %h ".kiln/intermediate/pc/pcm/s$i.pcm")" -ge 2 ]
		[ "$(head -c 16 "src/s$i.raw" | xxh128sum | cut -d' ' -f1)" = "$(xxh128sum <"build/pc/out/s$i.bin" | cut -d' ' -f1)" ]
	done
	"$KILN" stop
	run "$KILN" fsck
	[ "$status" -eq 0 ] || { echo "$output"; false; }
}
