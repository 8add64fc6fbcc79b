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
