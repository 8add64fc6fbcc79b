#!/usr/bin/env bats
# godot.bats — a real engine on the other end (examples/godot): the Godot 3
# project runs headless (Debian's godot3-server), follows the daemon's
# events over the dashboard's websocket, and reloads the texture kiln
# rebuilds when a source PNG is saved. Its lines ("kiln: reloaded URL WxH
# sha256=... id=... PATH") are checked against the built file itself
# (identify, sha256sum) and against kiln's own index of build/pc/.

bats_require_minimum_version 1.5.0

load daemon_helpers

eval "helpers_$(declare -f teardown)"

teardown() {
	local rv=0
	if [ -n "${GODOT_PID:-}" ]; then
		kill -TERM "$GODOT_PID" 2>/dev/null
		for _ in $(seq 1 100); do running "$GODOT_PID" || break; sleep 0.05; done
		kill -9 "$GODOT_PID" 2>/dev/null
		wait "$GODOT_PID" 2>/dev/null || true
	fi
	helpers_teardown || rv=1
	return $rv
}

# need_godot: install godot3-server as root when missing (make test's
# scripts/ensure-deps test does); skip only when it cannot be had.
need_godot() {
	command -v godot3-server >/dev/null && return 0
	if [ "$(id -u)" -eq 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			godot3-server >/dev/null 2>&1 || true
	fi
	command -v godot3-server >/dev/null ||
		skip "godot3-server is not installed and cannot be (not root): apt-get install godot3-server"
}

# One image step, ImageMagick as the tool: the sprite scaled to twice its
# size, so the texture's size is the built file's, not the source's.
write_project() {
	mkdir -p art
	convert -size 16x8 xc:red art/hero.png
	cat >kiln.yaml <<'YAML'
kiln: 1
project: g
sources: [art]
profiles:
  pc: {}
tools:
  sprite: { run: [convert, "${in}", -scale, 200%, -strip, "png:${out}"] }
assets:
  - { url: sprites/hero, tool: sprite, inputs: [art/hero.png], outputs: hero.png }
YAML
}

# start_game: the example project (a copy, so the run writes nothing into
# the source tree) headless, following sprites/hero of this project;
# its output in $GAME_LOG. Godot wants writable HOME and XDG folders.
start_game() {
	local game=$BATS_TEST_TMPDIR/game home=$BATS_TEST_TMPDIR/home
	cp -r "$KILN_TOP/examples/godot" "$game"
	mkdir -p "$home"
	GAME_LOG=$BATS_TEST_TMPDIR/game.log
	HOME=$home XDG_DATA_HOME=$home/data XDG_CONFIG_HOME=$home/config \
		XDG_CACHE_HOME=$home/cache KILN_PROJECT=$P \
		godot3-server --path "$game" -- --kiln-texture=sprites/hero \
		>"$GAME_LOG" 2>&1 &
	GODOT_PID=$!
}

# start_editor: the Godot editor (godot3-server runs it headless too) on
# this folder, a Godot project holding the kiln project: the example's
# files copied in, its plugin following sprites/hero. Output in $GAME_LOG.
start_editor() {
	local home=$BATS_TEST_TMPDIR/home
	cp -r "$KILN_TOP/examples/godot/." .
	mkdir -p "$home"
	GAME_LOG=$BATS_TEST_TMPDIR/editor.log
	HOME=$home XDG_DATA_HOME=$home/data XDG_CONFIG_HOME=$home/config \
		XDG_CACHE_HOME=$home/cache KILN_TEXTURES=sprites/hero \
		godot3-server --path "$P" -e >"$GAME_LOG" 2>&1 &
	GODOT_PID=$!
}

# game_said REGEX: a line of the game's output matches (extended regex).
game_said() {
	grep -aEq "$1" "$GAME_LOG"
}

# index_has ID: build/pc/kiln-index.txt lists sprites/hero with kiln's hash
# ID (the index is rewritten as the build ends, after the step's event).
index_has() {
	awk -F'\t' -v id="$1" '$1 == "sprites/hero" && $2 == id { f = 1 } END { exit !f }' \
		build/pc/kiln-index.txt
}

# check_line WORD SIZE: the game's last "kiln: WORD sprites/hero" line
# names SIZE and the SHA-256 of build/pc/sprites/hero.png as it is now
# (the file is in place before the step's event is sent), and the id
# kiln's index and `kiln why` give it.
check_line() {
	local line id
	line=$(grep -a "^kiln: $1 sprites/hero " "$GAME_LOG" | tail -n 1)
	id=${line##* id=}; id=${id%% *}
	[ "$(identify -format %wx%h build/pc/sprites/hero.png)" = "$2" ]
	[ "$line" = "kiln: $1 sprites/hero $2 sha256=$(sha256sum <build/pc/sprites/hero.png | cut -d' ' -f1) id=$id build/pc/sprites/hero.png" ] ||
		{ echo "the game said: $line"; cat "$GAME_LOG"; false; }
	wait_for index_has "$id"
	"$KILN" why -p pc sprites/hero | grep -qF "output out: build/pc/sprites/hero.png $id"
}

@test "the game loads the built texture, then reloads it with its new size and hash when the source PNG is saved" {
	need_godot
	write_project
	"$KILN" build >/dev/null
	# no `kiln ui` yet: the game runs it (KILN) to have the dashboard served
	start_game
	wait_for game_said '^kiln: connected to http://127\.0\.0\.1:[0-9]+ '
	wait_for game_said '^kiln: loaded sprites/hero 32x16 '
	check_line loaded 32x16
	[ -f .kiln/ui ]
	# the artist saves a bigger sprite
	convert -size 40x20 xc:blue art/hero.png
	wait_for game_said '^kiln: reloaded sprites/hero 80x40 '
	check_line reloaded 80x40
	# the game is one of the daemon's subscriptions while it runs
	[ "$(status_field subscribers)" -ge 1 ]
}

@test "a save the tool fails on keeps the game's texture and says why; the next good save reloads it" {
	need_godot
	write_project
	"$KILN" build >/dev/null
	"$KILN" ui >/dev/null
	start_game
	wait_for game_said '^kiln: loaded sprites/hero 32x16 '
	echo "not a png" >art/hero.png
	wait_for game_said '^kiln: failed sprites/hero: '
	! game_said '^kiln: reloaded '
	convert -size 24x24 xc:green art/hero.png
	wait_for game_said '^kiln: reloaded sprites/hero 48x48 '
	check_line reloaded 48x48
}

@test "the game outlives the daemon: after kiln stop it reconnects and reloads what changed meanwhile" {
	need_godot
	write_project
	"$KILN" build >/dev/null
	"$KILN" ui >/dev/null
	start_game
	wait_for game_said '^kiln: loaded sprites/hero 32x16 '
	"$KILN" stop >/dev/null
	wait_for game_said '^kiln: disconnected: '
	convert -size 10x30 xc:yellow art/hero.png
	# the next daemon serves the dashboard at the same address (.kiln/ui);
	# the game starts one itself (kiln ui) if nothing else does first
	"$KILN" status >/dev/null
	wait_for game_said '^kiln: reloaded sprites/hero 20x60 '
	check_line reloaded 20x60
	[ "$(grep -ac '^kiln: connected to ' "$GAME_LOG")" -ge 2 ]
}

@test "the editor plugin reimports the texture kiln rebuilt inside the Godot project" {
	need_godot
	write_project
	"$KILN" build >/dev/null
	start_editor
	wait_for game_said '^kiln \(editor\): following sprites/hero$'
	convert -size 40x20 xc:blue art/hero.png
	wait_for game_said '^kiln \(editor\): reimported res://build/pc/sprites/hero\.png 80x40 id=[0-9a-f]{32}$'
	line=$(grep -a '^kiln (editor): reimported ' "$GAME_LOG" | tail -n 1)
	wait_for index_has "${line##*id=}"
	[ "$(identify -format %wx%h build/pc/sprites/hero.png)" = 80x40 ]
}
