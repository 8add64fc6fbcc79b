#!/usr/bin/env bats
# ui.bats — kiln ui: the dashboard kilnd serves (docs/ui.md), loaded in
# Debian's chromium, headless, driven over the DevTools protocol by
# ui_browser.py: the sample project's steps, a CLI build appearing live, a
# failure's last lines, a rebuild clicked on the page that the CLI sees,
# reconnecting to the next daemon; and curl: no secret, no page.
#
# Screenshots of the main view are saved as artifacts under the test's temp
# folder (their paths are printed: bats --print-output-on-failure, or
# --show-output-of-passing-tests, shows them).

bats_require_minimum_version 1.5.0

load daemon_helpers

BROWSER="python3 $BATS_TEST_DIRNAME/ui_browser.py"

# need_chromium: install it as root when missing; skip only when it cannot
# be had.
need_chromium() {
	command -v chromium >/dev/null && return 0
	if [ "$(id -u)" -eq 0 ]; then
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			chromium >/dev/null 2>&1 || true
	fi
	command -v chromium >/dev/null ||
		skip "chromium is not installed and cannot be (not root): apt-get install chromium"
}

# A project with a step that takes a moment, one that fails with two
# lines on stderr, and a quick one.
write_project() {
	mkdir -p src
	printf 'a\n' >src/ok.txt
	printf 's\n' >src/slow.txt
	printf 'b\n' >src/bad.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  slow: { run: [sh, -c, 'sleep 1.5; cp "$0" "$1"', "${in}", "${out}"] }
  broken: { run: [sh, -c, 'echo "first complaint" >&2; echo "the very last line" >&2; exit 3'] }
assets:
  - { url: ok, tool: copy, inputs: [src/ok.txt], outputs: ok.txt }
  - { url: slow, tool: slow, inputs: [src/slow.txt], outputs: slow.txt }
  - { url: bad, tool: broken, inputs: [src/bad.txt], outputs: bad.txt }
YAML
}

# shot NAME: the path of a screenshot artifact (printed).
shot() {
	echo "$BATS_TEST_TMPDIR/$1.png"
}

@test "a request without the secret is refused; kiln ui prints the same URL again" {
	write_project
	url=$("$KILN" ui)
	[[ "$url" =~ ^http://127\.0\.0\.1:[0-9]+/[0-9a-f]{32}/$ ]] || { echo "url: $url"; false; }
	[ "$("$KILN" ui)" = "$url" ]
	base=${url%/*/}
	secret=${url#"$base/"}; secret=${secret%/}
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$url")" = 200 ]
	[ "$(curl -s -o /dev/null -w '%{http_code}' "${url}api/status")" = 200 ]
	other=0
	[ "${secret:0:1}" = 0 ] && other=1
	for bad in "$base/" "$base/index.html" "$base/api/status" "$base/$other${secret:1}/" \
	           "$base/${secret}0/api/status" "$base/${secret:0:31}/"; do
		code=$(curl -s -o /dev/null -w '%{http_code}' "$bad")
		[ "$code" = 403 ] || { echo "$bad answered $code"; false; }
	done
	# a build is an action: POST only
	[ "$(curl -s -o /dev/null -w '%{http_code}' "${url}api/build?url=ok")" = 404 ]
	# the file that lets the next daemon serve the same URL is private
	[ "$(stat -c %a .kiln/ui)" = 600 ]
}

@test "--listen beyond loopback needs the daemon's client token; a remote client may not ask for the page" {
	write_project
	run --separate-stderr "$KILN" ui --listen 0.0.0.0
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"--token-file"* ]] || { echo "stderr: $stderr"; false; }
	"$KILN" stop >/dev/null
	free_port
	echo client-token-of-sixteen-bytes >client.token
	"$KILND" --project . --listen "tcp://127.0.0.1:$port" --token-file client.token
	run --separate-stderr "$KILN" ui --listen 0.0.0.0
	[ "$status" -eq 0 ] || { echo "$stderr"; false; }
	[[ "$output" =~ ^http://0\.0\.0\.0:[0-9]+/[0-9a-f]{32}/$ ]] || { echo "url: $output"; false; }
	local_url="http://127.0.0.1:${output#http://0.0.0.0:}"
	[ "$(curl -s -o /dev/null -w '%{http_code}' "${local_url}api/status")" = 200 ]
	# the ui request is the admin's: the client token may not send it
	mkdir other
	run --separate-stderr sh -c 'cd other && exec "$0" --connect "$1" --token-file ../client.token ui' \
		"$KILN" "tcp://127.0.0.1:$port"
	[ "$status" -ne 0 ]
	[[ "$stderr" == *"may not send 'ui'"* ]] || { echo "stderr: $stderr"; false; }
}

@test "the dashboard's JSON is the wire schema's, and parses" {
	write_project
	url=$("$KILN" ui)
	# pipefail: a refused request (curl -f) fails the case, whatever jq says
	set -o pipefail
	curl -sf "${url}api/steps" | jq -e '.steps | map(.url) == ["bad", "ok", "slow"]'
	"$KILN" build ok >/dev/null
	curl -sf "${url}api/steps" | jq -e '.steps | map(select(.url == "ok"))[0].last == "RAN"'
	curl -sf "${url}api/why?url=ok" | jq -e '.status == "STATUS_OK" and .why_reply.record.decision == "RAN"'
	curl -sf "${url}api/deps?url=ok" | jq -e '.deps_reply.inputs == ["src/ok.txt"]'
	curl -sf "${url}api/status" | jq -e '.status_reply.event_epoch | (type == "string") or (. <= 9007199254740992)'
	[ "$(curl -s -o /dev/null -w '%{http_code}' "${url}api/why?url=nosuch")" != 200 ]
}

@test "the page shows the sample project's steps" {
	need_chromium
	tar -C "$KILN_TOP/assets-sample" --exclude=./build --exclude=./.kiln -cf - . | tar -xf -
	url=$("$KILN" ui)
	$BROWSER "$url" \
		'wait:!!document.querySelector(".row[data-url=\"ui/atlas\"]")' \
		'wait:!!document.querySelector(".row[data-url=\"sprites/hero\"]")' \
		'wait:document.getElementById("conn").textContent === "live"' \
		"shot:$(shot sample)"
	echo "screenshot: $(shot sample)"
	[ -s "$(shot sample)" ]
}

@test "a build started from the CLI appears live with its progress; a failure shows its last lines; then its timeline" {
	need_chromium
	write_project
	url=$("$KILN" ui)
	run $BROWSER "$url" \
		'wait:document.getElementById("conn").textContent === "live"' \
		"run:\"$KILN\" build -k >build.out 2>&1 &" \
		'wait:document.getElementById("slots").textContent.includes("slow")' \
		'wait:!!document.querySelector(".build .bar")' \
		"shot:$(shot running)" \
		'wait:/build 1 \(default\) 3\/3 · done/.test(document.getElementById("builds").textContent)' \
		'wait:document.querySelector(".failure[data-url=\"bad\"] .tail").textContent.includes("the very last line")' \
		'wait:!!document.querySelector(".failure a[href*=\"api/log?id=\"]")' \
		'wait:document.getElementById("timeline-title").textContent.includes("kiln build 1")' \
		'wait:slices.filter((s) => s.text.startsWith("slow ")).length === 1' \
		"shot:$(shot main)" \
		'print:document.querySelector(".row[data-url=\"slow\"] .st").textContent'
	echo "screenshots: $(shot running) $(shot main)"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$output" = '"ran"' ] || { echo "slow shows $output"; false; }
}

@test "clicking rebuild on a step runs it: the CLI sees its event" {
	need_chromium
	write_project
	"$KILN" build ok >/dev/null
	url=$("$KILN" ui)
	printf 'changed\n' >src/ok.txt
	# outside the project: a write in it is an edit the daemon reports
	"$KILN" events --json ok >"$BATS_TEST_TMPDIR/ev.out" 3>&- &
	ev=$!
	wait_for subscribed_ui 1
	$BROWSER "$url" \
		'wait:!!document.querySelector(".row[data-url=\"ok\"] .rebuild")' \
		'click:.row[data-url="ok"] .rebuild' \
		'wait:document.querySelector(".row[data-url=\"ok\"] .st").textContent === "ran"'
	wait_for grep -q '"type":"step"' "$BATS_TEST_TMPDIR/ev.out"
	kill "$ev"
	jq -se 'any(.[]; .type == "step" and .url == "ok" and .result == "ran")' \
		"$BATS_TEST_TMPDIR/ev.out" >/dev/null || { cat "$BATS_TEST_TMPDIR/ev.out"; false; }
	[ "$(cat build/default/ok.txt)" = changed ]
}

@test "the page reconnects to the project's next daemon by itself" {
	need_chromium
	write_project
	url=$("$KILN" ui)
	$BROWSER "$url" \
		'wait:document.getElementById("conn").textContent === "live"' \
		"run:\"$KILN\" stop >/dev/null" \
		'wait:document.getElementById("conn").textContent !== "live"' \
		"run:\"$KILN\" build ok >/dev/null" \
		'wait:document.getElementById("conn").textContent === "live"' \
		'wait:document.querySelector(".row[data-url=\"ok\"] .st").textContent === "ran"'
	# the next daemon serves the same URL (.kiln/ui)
	[ "$("$KILN" ui)" = "$url" ]
}

@test "a project of 3000 steps: the list holds only the rows in view, and filters by glob and status" {
	need_chromium
	mkdir -p src/a src/b
	for i in $(seq 1 1500); do : >src/a/$i.txt; : >src/b/$i.txt; done
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
rules:
  - { match: "src/**/*.txt", url: "c/${match.path}", outputs: "${match.path}.txt", tool: copy }
YAML
	url=$("$KILN" ui)
	run $BROWSER "$url" \
		'wait:document.getElementById("count").textContent === "(3000)"' \
		'print:document.querySelectorAll("#rows .row").length' \
		'run:true' \
		'wait:(() => { const g = document.getElementById("glob"); g.value = "c/b/1?"; g.dispatchEvent(new Event("input")); return true; })()' \
		'wait:document.getElementById("count").textContent === "(10)"' \
		'wait:(() => { const s = document.getElementById("status"); s.value = "failed"; s.dispatchEvent(new Event("change")); return true; })()' \
		'wait:document.getElementById("count").textContent === "(0)"'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$output" -lt 100 ] || { echo "$output rows in the page for 3000 steps"; false; }
}

@test "hold on the page holds change reports until release, as kiln hold does" {
	need_chromium
	write_project
	"$KILN" build ok >/dev/null
	url=$("$KILN" ui)
	"$KILN" events --json >"$BATS_TEST_TMPDIR/ev.out" 3>&- &
	ev=$!
	wait_for subscribed_ui 1
	run $BROWSER "$url" \
		'wait:document.getElementById("conn").textContent === "live"' \
		'click:#hold' \
		'wait:document.getElementById("hold").textContent === "holding"' \
		"run:printf 'held\n' >src/ok.txt; sleep 0.5" \
		"run:! grep -q '\"type\":\"changed\"' '$BATS_TEST_TMPDIR/ev.out'" \
		'click:#release' \
		"run:for i in \$(seq 100); do grep -q 'src/ok.txt' '$BATS_TEST_TMPDIR/ev.out' && exit 0; sleep 0.1; done; exit 1"
	kill "$ev"
	[ "$status" -eq 0 ] || { echo "$output"; cat "$BATS_TEST_TMPDIR/ev.out"; false; }
}

@test "the page lists who follows what: a kiln events with a filter, and itself" {
	need_chromium
	write_project
	url=$("$KILN" ui)
	"$KILN" events -p default 'o*' 'sl?w' >/dev/null 3>&- &
	ev=$!
	wait_for subscribed_ui 1
	run $BROWSER "$url" \
		'wait:document.getElementById("subs").textContent.includes("o* sl?w (default)")' \
		'wait:document.getElementById("subs").textContent.includes("a dashboard page: every URL")'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	curl -sf "${url}api/status" |
		jq -e '[.status_reply.subscriptions[] | select(.dashboard | not) | .urls] == [["o*", "sl?w"]]'
	kill "$ev"
}

# subscribed_ui N: the daemon reports N subscriptions.
subscribed_ui() {
	[ "$(status_field subscribers)" = "$1" ]
}

@test "the store panel shows the store's blobs and size, and the last gc, as objects/ holds them" {
	need_chromium
	write_project
	"$KILN" build ok slow >/dev/null
	printf 'c\n' >src/ok.txt
	"$KILN" build ok >/dev/null
	"$KILN" gc --grace 0s --max-age 0s >/dev/null
	n=$(find .kiln/store/objects -type f | wc -l)
	bytes=$(find .kiln/store/objects -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
	removed=$("$KILN" status --json | jq -r .last_gc_removed_blobs)
	[ "$removed" -ge 1 ] || { echo "gc removed nothing"; false; }
	url=$("$KILN" ui)
	run $BROWSER "$url" \
		"wait:document.getElementById(\"store-blobs\").textContent === \"$n\"" \
		"wait:document.getElementById(\"store-size\").textContent.includes(\"($bytes bytes)\")" \
		"wait:document.getElementById(\"store-gc\").textContent.includes(\"removed $removed blobs\")" \
		"shot:$(shot store)"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	echo "screenshot: $(shot store)"
}

@test "a bad log or trace request gets an HTTP answer (400 or 404), not a closed connection" {
	write_project
	url=$("$KILN" ui)
	for want in "404 api/log?id=0123456789abcdef0123456789abcdef" "400 api/log?id=zz" \
	            "400 api/log" "400 api/trace?build=-1" "400 api/trace?build=" \
	            "404 api/trace?build=99" "404 api/trace"; do
		code=$(curl -s -o "$BATS_TEST_TMPDIR/body" -w '%{http_code}' "${url}${want#* }")
		[ "$code" = "${want%% *}" ] || { echo "${want#* } answered $code"; false; }
		jq -e '.error | length > 0' "$BATS_TEST_TMPDIR/body" >/dev/null
	done
}

# ws_upgrade URL [ORIGIN]: the HTTP status of a websocket upgrade of URL
# (ws://...), sent with that Origin header or with none, as a game
# engine's client sends it.
ws_upgrade() {
	python3 - "$@" <<'PY'
import socket, sys
url = sys.argv[1][len("ws://"):]
hostport, path = url.split("/", 1)
host, port = hostport.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=30)
origin = "Origin: %s\r\n" % sys.argv[2] if len(sys.argv) > 2 else ""
s.sendall(("GET /%s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n%s\r\n"
           % (path, hostport, origin)).encode())
head = b""
while b"\r\n" not in head:
    chunk = s.recv(1)
    if not chunk:
        break
    head += chunk
print(head.split(b" ")[1].decode() if head.count(b" ") else "closed")
PY
}

@test "another site's page may not act or follow events (403); the page itself and clients without an Origin may" {
	write_project
	url=$("$KILN" ui)
	hostport=${url#http://}; hostport=${hostport%%/*}
	secret=${url%/}; secret=${secret##*/}
	post() { # post ORIGIN PATH: the status of a POST from ORIGIN ("": none)
		curl -s -o /dev/null -w '%{http_code}' -X POST ${1:+-H "Origin: $1"} "${url}api/$2"
	}
	[ "$(post http://evil.example hold)" = 403 ]
	[ "$(post null hold)" = 403 ]
	[ "$(post "http://$hostport.evil.example" hold)" = 403 ]
	[ "$(post http://evil.example "build?url=ok")" = 403 ]
	[ "$(post "http://$hostport" release)" = 200 ]
	[ "$(post "" release)" = 200 ]
	[ "$(post "" "build?url=ok")" = 200 ]
	wait_for test -f build/default/ok.txt
	# reading stays open to any page that has the secret: GETs answer
	[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Origin: http://evil.example' "${url}api/status")" = 200 ]
	ws="ws://$hostport/ws?secret=$secret"
	[ "$(ws_upgrade "$ws" http://evil.example)" = 403 ]
	[ "$(ws_upgrade "$ws" null)" = 403 ]
	[ "$(ws_upgrade "$ws" "http://$hostport")" = 101 ]
	[ "$(ws_upgrade "$ws")" = 101 ]
}

@test "a URL holder can hold changes and release them (docs/ui.md says so)" {
	write_project
	url=$("$KILN" ui)
	curl -sf -X POST "${url}api/hold" | jq -e '.status == "STATUS_OK"'
	curl -sf -X POST "${url}api/release" | jq -e '.status == "STATUS_OK"'
	grep -q 'hold changes' "$KILN_TOP/docs/ui.md"
	! grep -q 'not hold changes' "$KILN_TOP/docs/ui.md"
}

# A project with image outputs: a PNG file, a folder holding a text file
# and two images (its first image in path order is the JPEG), a step that
# fails once its PNG input is marked broken, and a text output.
PNG=iVBORw0KGgoAAAANSUhEUgAAAAgAAAAGCAIAAABxZ0isAAAAEUlEQVR4nGPQqLiDFTEMpAQAv8JHQSLrH00AAAAASUVORK5CYII=
JPEG=/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAMCAgICAgMCAgIDAwMDBAYEBAQEBAgGBgUGCQgKCgkICQkKDA8MCgsOCwkJDRENDg8QEBEQCgwSExIQEw8QEBD/2wBDAQMDAwQDBAgEBAgQCwkLEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBD/wAARCAAGAAgDAREAAhEBAxEB/8QAFAABAAAAAAAAAAAAAAAAAAAAB//EABQQAQAAAAAAAAAAAAAAAAAAAAD/xAAVAQEBAAAAAAAAAAAAAAAAAAAICf/EABQRAQAAAAAAAAAAAAAAAAAAAAD/2gAMAwEAAhEDEQA/AHhPom3/2Q==
write_image_project() {
	mkdir -p src
	echo "$PNG" | base64 -d >src/pic.png
	echo "$PNG" | base64 -d >src/tex.png
	echo "$JPEG" | base64 -d >src/b.jpg
	printf 'text\n' >src/note.txt
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  copy: { run: [cp, "${in}", "${out}"] }
  pack: { run: [sh, -c, 'mkdir -p "$1" && echo a >"$1/a.txt" && cp "$0" "$1/b.jpg" && cp src/pic.png "$1/c.png"', "${in}", "${out}"] }
  check: { run: [sh, -c, 'if tail -c 6 "$0" | grep -q broken; then echo "tex: broken texture" >&2; exit 1; fi; cp "$0" "$1"', "${in}", "${out}"] }
assets:
  - { url: pic, tool: copy, inputs: [src/pic.png], outputs: pic.png }
  - { url: atlas, tool: pack, inputs: [src/b.jpg], outputs: "atlas/" }
  - { url: tex, tool: check, inputs: [src/tex.png], outputs: tex.png }
  - { url: note, tool: copy, inputs: [src/note.txt], outputs: note.txt }
YAML
}

@test "api/image serves a step's image output (PNG, JPEG, a folder's first image), and nothing else" {
	write_image_project
	url=$("$KILN" ui)
	[ "$(curl -s -o /dev/null -w '%{http_code}' "${url}api/image?profile=default&url=pic&output=out")" = 404 ]
	"$KILN" build >/dev/null
	img() { # img QUERY: "STATUS TYPE" of api/image?QUERY, its body in $BATS_TEST_TMPDIR/img
		curl -s -o "$BATS_TEST_TMPDIR/img" -w '%{http_code} %{content_type}' "${url}api/image?$1"
	}
	[ "$(img 'profile=default&url=pic&output=out')" = "200 image/png" ]
	cmp "$BATS_TEST_TMPDIR/img" src/pic.png
	[ "$(img 'profile=default&url=atlas&output=out')" = "200 image/jpeg" ]
	cmp "$BATS_TEST_TMPDIR/img" src/b.jpg
	[[ "$(img 'profile=default&url=note&output=out')" == "415 "* ]]
	[[ "$(img 'profile=default&url=pic&output=other')" == "404 "* ]]
	[[ "$(img 'profile=default&url=../../src/pic.png&output=out')" == "404 "* ]]
	[[ "$(img 'profile=default&url=%2Fetc%2Fpasswd&output=out')" == "404 "* ]]
	[[ "$(img 'url=pic&output=out')" == "400 "* ]]
	# a failed run publishes nothing: its last image stays what is served
	printf 'broken' >>src/tex.png
	run "$KILN" build tex
	[ "$status" -ne 0 ]
	[ "$(img 'profile=default&url=tex&output=out')" = "200 image/png" ]
	cmp "$BATS_TEST_TMPDIR/img" src/pic.png
}

@test "the page shows image outputs as thumbnails: in a step's view and on failures" {
	need_chromium
	write_image_project
	"$KILN" build >/dev/null
	printf 'broken' >>src/tex.png
	url=$("$KILN" ui)
	run $BROWSER "$url" \
		'wait:document.getElementById("conn").textContent === "live"' \
		"run:\"$KILN\" build -k >/dev/null 2>&1; true" \
		'wait:!!document.querySelector(".failure[data-url=\"tex\"]")' \
		'wait:(document.querySelector(".failure[data-url=\"tex\"] img.thumb") || {}).naturalWidth === 8' \
		'click:.row[data-url="pic"]' \
		'wait:(document.querySelector("#detail img.thumb") || {}).naturalWidth === 8' \
		'click:.row[data-url="atlas"]' \
		'wait:document.getElementById("detail-url").textContent === "atlas"' \
		'wait:(document.querySelector("#detail img.thumb") || {}).naturalHeight === 6' \
		"shot:$(shot thumbs)" \
		'click:.row[data-url="note"]' \
		'wait:document.getElementById("detail-url").textContent === "note" && document.getElementById("detail").textContent.includes("note.txt")' \
		'print:document.querySelectorAll("#detail img").length'
	echo "screenshot: $(shot thumbs)"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$output" = 0 ] || { echo "a text output drew $output images"; false; }
}

@test "a step deleted from the descriptions leaves the step list" {
	need_chromium
	mkdir -p src
	printf 'a\n' >src/a.txt
	yaml() { # yaml STEP...: kiln.yaml with these assets
		printf 'kiln: 1\nproject: t\nsources: [src]\nprofiles:\n  default: {}\n'
		printf 'tools:\n  copy: { run: [cp, "${in}", "${out}"] }\nassets:\n'
		for u in "$@"; do
			printf '  - { url: %s, tool: copy, inputs: [src/a.txt], outputs: %s.txt }\n' "$u" "$u"
		done
	}
	yaml gone ok later >kiln.yaml
	"$KILN" build gone >/dev/null
	"$KILN" build ok >/dev/null
	yaml ok later >kiln.yaml
	yaml ok >"$BATS_TEST_TMPDIR/ok-only.yaml"
	url=$("$KILN" ui)
	# the page replays the daemon's recent events: gone's run, then ok's
	run $BROWSER "$url" \
		'wait:document.getElementById("conn").textContent === "live"' \
		'wait:document.querySelector(".row[data-url=\"ok\"] .st").textContent === "ran"' \
		'wait:!!document.querySelector(".row[data-url=\"later\"]")' \
		'print:document.querySelectorAll(".row[data-url=\"gone\"]").length' \
		"run:cp '$BATS_TEST_TMPDIR/ok-only.yaml' kiln.yaml" \
		'wait:!document.querySelector(".row[data-url=\"later\"]")' \
		'wait:!!document.querySelector(".row[data-url=\"ok\"]")'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	[ "$output" = 0 ] || { echo "the deleted step is listed ($output rows)"; false; }
}

@test "the connection badge is not red before the page has tried to connect" {
	need_chromium
	write_project
	url=$("$KILN" ui)
	# scripts off: the page as first painted
	run $BROWSER "$url" \
		'wait:document.getElementById("conn").textContent === "live"' \
		'nojs:' \
		'wait:document.readyState === "complete" && document.getElementById("conn").textContent === "connecting"' \
		'print:getComputedStyle(document.getElementById("conn")).backgroundColor'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	# --bad, the colour of a lost connection
	[ "$output" != '"rgb(229, 83, 75)"' ] || { echo "red at first paint"; false; }
}

@test "hold and release say on the page what they do" {
	need_chromium
	write_project
	url=$("$KILN" ui)
	run $BROWSER "$url" \
		'wait:document.getElementById("conn").textContent === "live"' \
		'wait:document.getElementById("hold").title.includes("nothing rebuilds")' \
		'click:#hold' \
		'wait:(() => { const n = document.getElementById("hold-note"); return n && !n.hidden && n.textContent.includes("until release"); })()' \
		'click:#release' \
		'wait:document.getElementById("hold-note").textContent.includes("reported now, as one batch")'
	[ "$status" -eq 0 ] || { echo "$output"; false; }
}

@test "the timeline of a -j 2 build draws 2 slots, publishing on lanes of its own" {
	need_chromium
	mkdir -p src
	for i in 1 2 3 4 5 6; do echo "$i" >"src/$i.txt"; done
	# folders of 300 files: publishing them takes a while after the tool
	# ended and its slot went to the next step
	cat >kiln.yaml <<'YAML'
kiln: 1
project: t
sources: [src]
profiles:
  default: {}
tools:
  many: { run: [sh, -c, 'mkdir -p "$1" && for i in $(seq 1 300); do echo "$0 $i" >"$1/f$i"; done', "${in}", "${out}"] }
rules:
  - { match: "src/*.txt", url: "m/${match.path}", outputs: "${match.path}/", tool: many }
YAML
	"$KILN" build -j 2 >/dev/null
	url=$("$KILN" ui)
	run $BROWSER "$url" \
		'wait:document.getElementById("timeline-title").textContent.includes("kiln build 1")' \
		"shot:$(shot lanes)" \
		'print:timelineLanes'
	echo "screenshot: $(shot lanes)"
	[ "$status" -eq 0 ] || { echo "$output"; false; }
	echo "lanes: $output"
	echo "$output" | jq -e '[.[] | select(startswith("slot"))] == ["slot 1", "slot 2"]'
	echo "$output" | jq -e 'any(.[]; startswith("publishing"))'
	# the trace: six step slices on two slots, each published after it
	jq -e '[.traceEvents[] | select(.cat == "step") | .tid] | unique == [1, 2]' .kiln/traces/last
	jq -e '[.traceEvents[] | select(.cat == "publish")] | length == 6' .kiln/traces/last
}
