#!/usr/bin/env bats
# kiln graph (README "The CLI"): the step graph as Graphviz dot and as
# JSON, on a copy of the sample project (assets-sample/, as sample.bats
# copies it) after a real build, and on a small project with a failing
# step. dot (Debian graphviz) must accept what kiln prints; the JSON is
# read with jq.

bats_require_minimum_version 1.5.0

load daemon_helpers

setup_file() {
	make -C "$KILN_TOP" --no-print-directory sample-tools >/dev/null
}

# sample_copy: the sample project in $BATS_TEST_TMPDIR/p, built for pc.
sample_copy() {
	for t in convert optipng glslangValidator oggenc; do
		command -v $t >/dev/null || skip "$t is not installed (scripts/ensure-deps demo)"
	done
	tar -C "$KILN_TOP/assets-sample" --exclude=./build --exclude=./.kiln -cf - . |
		tar -C "$P" -xf -
	run "$KILN" build -p pc
	[ "$status" -eq 0 ] || { echo "$output"; false; }
}

# ids JQ_FILTER: the sorted, space-separated result of a jq filter on $output.
ids() {
	printf '%s\n' "$output" | jq -r "$1" | sort | tr '\n' ' ' | sed 's/ $//'
}

@test "graph of the sample: dot accepts it, with solid declared and dashed discovered edges" {
	command -v dot >/dev/null || skip "dot is not installed (Debian: graphviz)"
	sample_copy
	run "$KILN" graph -p pc
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	printf '%s\n' "$output" >g.dot
	run dot -Tsvg g.dot -o g.svg
	[ "$status" -eq 0 ] || { echo "dot refused it: $output"; false; }
	grep -q '<svg' g.svg
	# declared: a source input and a prerequisite, solid
	grep -qxF '	"file:art/ui/star.png" -> "step:sized/ui/star";' g.dot
	grep -qxF '	"step:ui/atlas" -> "step:bundles/preload";' g.dot
	# discovered: the shaders' include from glslang's depfile, levelc's
	# `kiln need` of a sprite, dashed
	grep -qxF '	"file:shaders/include/common.glsl" -> "step:shaders/sprite.frag" [style=dashed];' g.dot
	grep -qxF '	"step:sprites/hero" -> "step:levels/level1" [style=dashed, label="need"];' g.dot
}

@test "graph --format json of one URL: what it needs, nothing else" {
	command -v jq >/dev/null || skip "jq is not installed"
	sample_copy
	run "$KILN" graph ui/atlas --format json -p pc
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(printf '%s\n' "$output" | jq -r .profile)" = pc ]
	[ "$(ids '.nodes[] | select(.kind=="step") | .name')" = \
	  "sized/ui/button sized/ui/cursor sized/ui/heart sized/ui/panel sized/ui/star ui/atlas ui/sprites/button ui/sprites/cursor ui/sprites/heart ui/sprites/panel ui/sprites/star" ]
	[ "$(ids '.edges[] | select(.to=="step:ui/atlas") | "\(.kind):\(.from)"')" = \
	  "prerequisite:step:ui/sprites/button prerequisite:step:ui/sprites/cursor prerequisite:step:ui/sprites/heart prerequisite:step:ui/sprites/panel prerequisite:step:ui/sprites/star" ]
	# every edge joins two listed nodes
	[ "$(printf '%s\n' "$output" | jq '[.nodes[].id] as $n | [.edges[] | select((.from | IN($n[]) | not) or (.to | IN($n[]) | not))] | length')" = 0 ]
	[ "$(ids '.nodes[] | select(.name=="ui/atlas") | .state')" = ran ]
}

@test "graph --rdeps of a source file: the steps that depend on it, up to the bundle" {
	command -v jq >/dev/null || skip "jq is not installed"
	sample_copy
	run "$KILN" graph --rdeps art/ui/star.png --format json
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(ids '.nodes[].id')" = \
	  "file:art/ui/star.png step:bundles/preload step:sized/ui/star step:ui/atlas step:ui/sprites/star" ]
	[ "$(ids '.edges[] | "\(.from)>\(.to)"')" = \
	  "file:art/ui/star.png>step:sized/ui/star step:sized/ui/star>step:ui/sprites/star step:ui/atlas>step:bundles/preload step:ui/sprites/star>step:ui/atlas" ]
}

@test "graph marks a failed step; a name that matches nothing is exit 2" {
	command -v jq >/dev/null || skip "jq is not installed"
	mkdir -p src
	echo a >src/a.txt
	echo b >src/b.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: g
sources: [src]
profiles:
  pc:
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  fail: { run: [sh, -c, "exit 3"] }
rules:
  - { match: "src/*.txt", url: "t/${match.name}", outputs: "${match.name}.txt", tool: copy }
assets:
  - { url: broken, tool: fail, inputs: ["@t/a"], outputs: x }
YAML
	run "$KILN" build -k
	[ "$status" -ne 0 ]
	run "$KILN" graph --format json
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(ids '.nodes[] | select(.kind=="step") | "\(.name)=\(.state)"')" = "broken=failed t/a=ran t/b=ran" ]
	run "$KILN" graph broken
	[ "$status" -eq 0 ]
	printf '%s\n' "$output" | grep -F '"step:broken"' | grep -q 'FAILED", color=red'
	if command -v dot >/dev/null; then
		printf '%s\n' "$output" | dot -Tsvg >/dev/null
	fi
	run "$KILN" graph 'nothing/*'
	[ "$status" -eq 2 ]
	[[ "$output" == *"nothing/*: no step or file of profile pc matches"* ]]
	run "$KILN" graph --format xml
	[ "$status" -eq 2 ]
}
