#!/usr/bin/env bats
# folder_outputs.bats — outputs declared as folders ("name/", docs/format.md,
# "Folder outputs"): stored as a tree of blobs, restored from the store,
# checked file by file in build/, given to consumers as a folder, kept
# alive by gc; and a glob input matching nothing refused by the build.

bats_require_minimum_version 1.5.0

load daemon_helpers

# A font "baker" writing a folder of glyph pages (one in a subfolder);
# every run appends a line to runs.txt outside the project's sources.
folder_project() {
	mkdir -p src
	printf 'abc\n' >src/font.txt
	cat >kiln.yaml <<YAML
kiln: 1
project: folders
sources: [src]
profiles:
  pc: {}
tools:
  bake:
    shell: true
    trace: false   # it counts its runs in a file outside the project
    run: 'echo run >>"$BATS_TEST_TMPDIR/runs.txt"; for c in \$(fold -w1 "\${in}"); do echo "glyph \$c" >"\${out.pages}/\$c.page"; done; mkdir "\${out.pages}/sub" "\${out.pages}/empty"; echo deep >"\${out.pages}/sub/deep.page"; cp "\${in}" "\${out.info}"'
  list:
    shell: true
    run: '(cd "\${in}" && find . -type f | sort | while read -r f; do printf "%s " "\$f"; cat "\$f"; done) >"\${out}"'
assets:
  - { url: fonts/main, tool: bake, inputs: [src/font.txt], outputs: { pages: "glyphs/", info: info.txt } }
  - { url: fonts/listing.txt, tool: list, inputs: ["@fonts/main#pages"] }
YAML
}

runs() { wc -l <"$BATS_TEST_TMPDIR/runs.txt"; }

@test "a folder output lands in build/ whole, with one index line for the folder, and a consumer reads it as a folder" {
	folder_project
	run bash -c 'umask 022 && exec "$KILN" build'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(cat build/pc/fonts/glyphs/a.page)" = "glyph a" ]
	# like every build/ file, the folder follows the user's umask
	[ "$(stat -c %a build/pc/fonts/glyphs build/pc/fonts/glyphs/sub build/pc/fonts/glyphs/sub/deep.page | tr '\n' ' ')" = "755 755 644 " ] ||
		{ ls -lR build/pc/fonts; false; }
	[ "$(cat build/pc/fonts/glyphs/c.page)" = "glyph c" ]
	[ "$(cat build/pc/fonts/glyphs/sub/deep.page)" = "deep" ]
	[ -d build/pc/fonts/glyphs/empty ]
	# one line for the folder: its path ends in '/', its hash is the tree record's
	line=$(grep -P '^fonts/main#pages\t' build/pc/kiln-index.txt)
	[ "$(printf '%s' "$line" | cut -f4)" = "fonts/glyphs/" ] || { echo "$line"; false; }
	! grep -q 'a.page' build/pc/kiln-index.txt
	run "$KILN" cat -p pc fonts/main#pages
	[[ "$output" == "kiln-tree 1"* ]] || { echo "$output"; false; }
	[[ "$output" == *" sub/deep.page"* ]] || { echo "$output"; false; }
	run "$KILN" ls -p pc
	[[ "$output" == *"output   pages = glyphs/"* ]] || { echo "$output"; false; }
	# the consumer was given the folder's path
	[ "$(cat build/pc/fonts/listing.txt)" = $'./a.page glyph a\n./b.page glyph b\n./c.page glyph c\n./sub/deep.page deep' ] ||
		{ cat build/pc/fonts/listing.txt; false; }
}

@test "second build runs nothing; rm -rf build/ restores the folder from the store without running the tool" {
	folder_project
	"$KILN" build >out 2>&1 || { cat out; false; }
	[ "$(runs)" -eq 1 ]
	run "$KILN" build
	[[ "$output" == *"0 ran"* ]] || { echo "$output"; false; }
	rm -rf build
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[[ "$output" == *"0 ran"* ]] || { echo "$output"; false; }
	[ "$(runs)" -eq 1 ]
	[ "$(cat build/pc/fonts/glyphs/b.page)" = "glyph b" ]
	[ "$(cat build/pc/fonts/glyphs/sub/deep.page)" = "deep" ]
	[ -d build/pc/fonts/glyphs/empty ]
	grep -qP '^fonts/main#pages\t' build/pc/kiln-index.txt
	# and a daemon started afresh finds it intact
	"$KILN" stop >/dev/null 2>&1 || true
	run "$KILN" build
	[[ "$output" == *"0 ran"* ]] || { echo "$output"; false; }
	[ "$(runs)" -eq 1 ]
}

@test "a file in the folder edited, deleted or added in build/ is caught and the folder restored" {
	folder_project
	"$KILN" build >out 2>&1 || { cat out; false; }
	chmod -R u+w build/pc/fonts/glyphs
	echo "hand edit" >build/pc/fonts/glyphs/a.page
	rm build/pc/fonts/glyphs/sub/deep.page
	echo stray >build/pc/fonts/glyphs/stray.page
	ln -s /etc/passwd build/pc/fonts/glyphs/link.page
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(cat build/pc/fonts/glyphs/a.page)" = "glyph a" ]
	[ "$(cat build/pc/fonts/glyphs/sub/deep.page)" = "deep" ]
	[ ! -e build/pc/fonts/glyphs/stray.page ]
	[ ! -L build/pc/fonts/glyphs/link.page ]
	[ -f /etc/passwd ]
	# from the store: the tool did not run again
	[ "$(runs)" -eq 1 ]
	# and a second build finds it intact
	run "$KILN" build
	[[ "$output" == *"0 ran"* ]] || { echo "$output"; false; }
}

@test "a changed source rebuilds the folder: files no longer made go, the consumer follows" {
	folder_project
	"$KILN" build >out 2>&1 || { cat out; false; }
	printf 'xy\n' >src/font.txt
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(cat build/pc/fonts/glyphs/x.page)" = "glyph x" ]
	[ ! -e build/pc/fonts/glyphs/a.page ]
	[ "$(cat build/pc/fonts/listing.txt)" = $'./sub/deep.page deep\n./x.page glyph x\n./y.page glyph y' ] ||
		{ cat build/pc/fonts/listing.txt; false; }
}

@test "gc keeps the files of a folder output while its tree is referenced" {
	folder_project
	"$KILN" build >out 2>&1 || { cat out; false; }
	h=$(xxh128sum build/pc/fonts/glyphs/sub/deep.page | cut -d' ' -f1)
	[ -f ".kiln/store/objects/${h:0:2}/${h:2}" ]
	run "$KILN" gc --grace 0s --max-age 0s
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ -f ".kiln/store/objects/${h:0:2}/${h:2}" ] || { echo "gc removed a file of a rooted tree"; false; }
	run "$KILN" fsck
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# the folder is still restored from the store
	rm -rf build
	"$KILN" build >out 2>&1 || { cat out; false; }
	[ "$(cat build/pc/fonts/glyphs/sub/deep.page)" = "deep" ]
}

@test "a symlink in a folder output fails the step, naming it" {
	folder_project
	sed -i 's|cp "\${in}" "\${out.info}"|cp "${in}" "${out.info}"; ln -s /etc/passwd "${out.pages}/evil"|' kiln.yaml
	run "$KILN" build
	[ "$status" -ne 0 ]
	[[ "$output" == *"folder output 'pages' (glyphs/): 'evil' is a symlink"* ]] || { echo "$output"; false; }
	[ ! -e build/pc/fonts/glyphs ]
}

@test "an output name ending in '/' is a folder; a path with a '/' inside is still refused" {
	folder_project
	sed -i 's|pages: "glyphs/"|pages: "a/glyphs/"|' kiln.yaml
	run --separate-stderr "$KILN" check
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"outputs.pages: output file 'a/glyphs/' must be a plain file name, or a folder's name ending in '/'"* ]] ||
		{ echo "$stderr"; false; }
}

@test "kiln build refuses a glob input that matches nothing, naming file, line and field" {
	folder_project
	sed -i 's|inputs: \[src/font.txt\]|inputs: [src/font.txt, "src/*.psd"]|' kiln.yaml
	run "$KILN" build
	[ "$status" -ne 0 ]
	[[ "$output" == *"kiln.yaml:"*": assets[0].inputs[1]: 'src/*.psd' matches no file in profile 'pc'"* ]] ||
		{ echo "$output"; false; }
	[ ! -e "$BATS_TEST_TMPDIR/runs.txt" ]
}

@test "an executable in a folder output stays executable in build/; its bit lost there is caught and restored" {
	folder_project
	sed -i 's|echo deep >"${out.pages}/sub/deep.page";|echo deep >"${out.pages}/sub/deep.page"; printf "\\043!/bin/sh\\necho hi\\n" >"${out.pages}/run.sh"; chmod 755 "${out.pages}/run.sh";|' kiln.yaml
	grep -q 'chmod 755' kiln.yaml || { cat kiln.yaml; false; }
	run bash -c 'umask 022 && exec "$KILN" build'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(stat -c %a build/pc/fonts/glyphs/run.sh build/pc/fonts/glyphs/a.page | tr '\n' ' ')" = "755 644 " ] ||
		{ ls -l build/pc/fonts/glyphs; false; }
	[ "$(build/pc/fonts/glyphs/run.sh)" = hi ]
	chmod -x build/pc/fonts/glyphs/run.sh
	run "$KILN" build
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$(runs)" -eq 1 ]   # restored from the store, not run again
	[ -x build/pc/fonts/glyphs/run.sh ] || { ls -l build/pc/fonts/glyphs; false; }
}
