tool
extends Node
# kiln_client.gd — follows a kiln daemon's events from Godot, in plain
# GDScript (no native code): the dashboard's HTTP API and its websocket
# (docs/ui.md, "How it talks to the daemon").
#
#   1. read PROJECT/.kiln/ui ("PORT SECRET [LISTEN]"); when it is missing,
#      or the daemon does not answer, run `kiln ui -C PROJECT` once (it
#      starts the daemon and writes the file), then read it again;
#   2. GET api/status: the daemon's event cursor (epoch and newest seq);
#   3. open ws://127.0.0.1:PORT/ws?secret=S&since=EPOCH:SEQ: every event
#      after that cursor, so nothing published between the status and the
#      websocket's own subscription is lost;
#   4. POST api/build?url=U for each followed URL (priority 100, as an
#      editor's build), then GET api/why?url=U: the outputs of its last
#      run, for what is up to date (up-to-date steps send no event);
#   5. then, for ever: a `sources_changed` event builds the URLs again, a
#      `step` event of a followed URL that ran (or was restored from the
#      cache) is `output_built` for each of its outputs, a failed one is
#      `step_failed`. A lost connection reconnects from the last cursor.
#
# The websocket request carries no Origin header (Godot's WebSocketClient
# sends none), which the dashboard accepts: it only refuses the Origin of
# another web page.
#
# Everything runs on the main thread, from _process: a Node added to the
# tree (an autoload at run time, an EditorPlugin's child in the editor).

signal connected(base_url)
signal disconnected(reason)
# url: the step; output: {"name", "id" (kiln's content hash, hex), "size",
# "path" (relative to the project), "abs_path"}; fresh: false for what was
# already built when the client connected (from api/why), true for a run
# the client saw happen.
signal output_built(url, output, fresh)
signal step_failed(url, error)
signal message(text)

const RETRY_S = 1.0          # between two connection attempts
const KILN_UI_EVERY = 5      # run `kiln ui` again after this many failures
const HTTP_TIMEOUT_S = 30    # a daemon that answers nothing this long: retry

var project_dir = ""         # the kiln project (absolute)
var profile = ""             # "": the project's first profile
var urls = []                # the step URLs to keep built and follow
var kiln_bin = "kiln"        # the CLI, to start the daemon's dashboard

var _base = ""               # http://127.0.0.1:PORT/SECRET/
var _ws_url = ""
var _ws = null
var _open = false
var _epoch = ""              # the cursor: 16 hex digits, and a seq
var _seq = 0
var _retry_in = 0.0
var _asking = false          # an attempt's api/status is on its way
var _failures = 0
var _stamp = {}              # url -> how many step events were applied


func _ready():
	set_process(true)


# Settings, the first found of: the command line after `--`
# (--kiln-project=DIR, --kiln-profile=P, --kiln-texture=URL, repeatable),
# the environment (KILN_PROJECT, KILN_PROFILE, KILN_TEXTURES: URLs
# separated by commas; KILN: the kiln CLI, "kiln" by default) and the
# project settings (kiln/project, relative to this project's folder;
# kiln/profile; kiln/textures). The kiln project defaults to the Godot
# project's own folder.
func configure():
	var here = ProjectSettings.globalize_path("res://")
	project_dir = _setting("project", "KILN_PROJECT", "kiln/project")
	if project_dir == "":
		project_dir = here
	elif project_dir.is_rel_path():
		project_dir = here.plus_file(project_dir)
	if project_dir.length() > 1 and project_dir.ends_with("/"):
		project_dir = project_dir.left(project_dir.length() - 1)
	profile = _setting("profile", "KILN_PROFILE", "kiln/profile")
	if OS.get_environment("KILN") != "":
		kiln_bin = OS.get_environment("KILN")
	urls = []
	for a in OS.get_cmdline_args():
		if a.begins_with("--kiln-texture="):
			urls.append(a.substr(15, a.length()))
	if urls.empty():
		urls = Array(OS.get_environment("KILN_TEXTURES").split(",", false))
	if urls.empty() and ProjectSettings.has_setting("kiln/textures"):
		urls = Array(ProjectSettings.get_setting("kiln/textures"))


static func _setting(name, env, key):
	var prefix = "--kiln-%s=" % name
	for a in OS.get_cmdline_args():
		if a.begins_with(prefix):
			return a.substr(prefix.length(), a.length())
	if OS.get_environment(env) != "":
		return OS.get_environment(env)
	if ProjectSettings.has_setting(key):
		return str(ProjectSettings.get_setting(key))
	return ""


func _exit_tree():
	if _ws != null:
		_ws.disconnect_from_host()
		_ws = null


func _process(delta):
	if _ws != null:
		_ws.poll()
		return
	if _asking:
		return  # the status request of this attempt is out
	_retry_in -= delta
	if _retry_in <= 0.0:
		_retry_in = RETRY_S
		_start()


# ---- connecting ---------------------------------------------------------

func _start():
	if _failures > 0 and _failures % KILN_UI_EVERY == 1:
		_run_kiln_ui()
	if not _read_port_file():
		_failures += 1
		return
	_asking = true
	_http_get("api/status", "_on_status")


# PROJECT/.kiln/ui into _base: true when it is there and well formed.
func _read_port_file():
	var f = File.new()
	if f.open(project_dir.plus_file(".kiln/ui"), File.READ) != OK:
		return false
	var words = f.get_line().strip_edges().split(" ", false)
	f.close()
	if words.size() < 2 or not words[0].is_valid_integer() or words[1].length() != 32:
		return false
	# the address it listens on; loopback unless `kiln ui --listen`, and
	# then loopback still reaches it
	var host = "127.0.0.1"
	if words.size() > 2 and words[2] != "0.0.0.0" and words[2] != "::":
		host = words[2]
	if host.find(":") >= 0:
		host = "[" + host + "]"
	_base = "http://%s:%s/%s/" % [host, words[0], words[1]]
	_ws_url = "ws://%s:%s/ws?secret=%s" % [host, words[0], words[1]]
	return true


# `kiln ui -C PROJECT`: starts the daemon if none runs and has it serve the
# dashboard (writing .kiln/ui). Blocks for as long as that takes.
func _run_kiln_ui():
	var out = []
	var rc = OS.execute(kiln_bin, ["ui", "-C", project_dir], true, out, true)
	if rc != 0:
		emit_signal("message", "kiln: `%s ui -C %s` failed (%d): %s" %
			[kiln_bin, project_dir, rc, PoolStringArray(out).join("").strip_edges()])


func _on_status(code, reply):
	_asking = false
	if code != 200 or not reply.has("status_reply"):
		_failures += 1
		return
	var st = reply["status_reply"]
	# a cursor of this daemon; on reconnecting to the same daemon the
	# cursor already held is newer (and nothing after it is lost)
	var epoch = _hex16(st["event_epoch"])
	if epoch != _epoch:
		_epoch = epoch
		_seq = _uint(st["event_seq"])
	_ws = WebSocketClient.new()
	# a batch of events is at most 1 MiB of JSON (docs/ui.md, "Security")
	_ws.set_buffers(1100, 4096, 64, 64)
	_ws.connect("connection_established", self, "_on_ws_open")
	_ws.connect("connection_closed", self, "_on_ws_closed")
	_ws.connect("connection_error", self, "_on_ws_error")
	_ws.connect("data_received", self, "_on_ws_data")
	var url = "%s&since=%s:%d" % [_ws_url, _epoch, _seq]
	if _ws.connect_to_url(url) != OK:
		_ws = null
		_failures += 1


func _on_ws_open(_protocol):
	_open = true
	_failures = 0
	emit_signal("connected", _base)
	for url in urls:
		build(url, true)


func _on_ws_closed(_clean):
	_lost("the daemon closed the connection")


func _on_ws_error():
	_lost("no connection to the daemon")


func _lost(reason):
	_ws = null
	_failures += 1
	if _open:
		_open = false
		emit_signal("disconnected", reason)


# Whether the event stream is open (else a followed URL added now is built
# once it is).
func is_following():
	return _open


# ---- builds and queries -------------------------------------------------

# Ask for url to be built (priority 100). initial: then also load what is
# already built (api/why), since an up-to-date step sends no event.
func build(url, initial = false):
	var q = "api/build?url=" + url.percent_encode()
	if profile != "":
		q += "&profile=" + profile.percent_encode()
	_http_post(q, "_on_build", [url, initial])


func _on_build(code, reply, url, initial):
	if code == 0:
		return  # no answer: the connection is lost, and reconnecting asks again
	if code != 200:
		emit_signal("step_failed", url, "build refused: " + str(reply.get("error", code)))
		return
	if profile == "":
		profile = reply["build_reply"]["profile"]
	if initial:
		var q = "api/why?url=%s&profile=%s" % [url.percent_encode(), profile.percent_encode()]
		_http_get(q, "_on_why", [url, _stamp.get(url, 0)])


func _on_why(code, reply, url, stamp):
	# a step event applied since the question is newer than this answer
	if code != 200 or _stamp.get(url, 0) != stamp:
		return
	var rec = reply["why_reply"].get("record", {})
	if rec.get("decision", "") == "FAILED":
		emit_signal("step_failed", url, rec.get("error", ""))
	for o in rec.get("outputs", []):
		_output(url, o, false)


func _http_get(path, method, args = []):
	_http(path, HTTPClient.METHOD_GET, method, args)


func _http_post(path, method, args = []):
	_http(path, HTTPClient.METHOD_POST, method, args)


# One request on an HTTPRequest of its own (they run one at a time each);
# method(code, json, args...) gets the answer (code 0: no answer).
func _http(path, verb, method, args):
	var r = HTTPRequest.new()
	r.timeout = HTTP_TIMEOUT_S
	add_child(r)
	r.connect("request_completed", self, "_on_http", [r, method, args])
	if r.request(_base + path, PoolStringArray(), false, verb, "") != OK:
		r.queue_free()
		callv(method, [0, {}] + args)


func _on_http(result, code, _headers, body, r, method, args):
	r.queue_free()
	var reply = {}
	if result == HTTPRequest.RESULT_SUCCESS:
		var p = JSON.parse(body.get_string_from_utf8())
		if p.error == OK and typeof(p.result) == TYPE_DICTIONARY:
			reply = p.result
	else:
		code = 0
	callv(method, [code, reply] + args)


# ---- events -------------------------------------------------------------

func _on_ws_data():
	var peer = _ws.get_peer(1)
	while _ws != null and peer.get_available_packet_count() > 0:
		var p = JSON.parse(peer.get_packet().get_string_from_utf8())
		if p.error == OK and typeof(p.result) == TYPE_DICTIONARY:
			_on_batch(p.result)


# One message of the stream: {"epoch", "through", "events"}, a heartbeat,
# or {"error"} as the daemon stops.
func _on_batch(m):
	if m.has("error"):
		emit_signal("message", "kiln: the event stream ended: " + str(m["error"]))
		return
	if not m.has("events"):
		return  # a heartbeat
	var rebuild = false
	var resync = false
	for e in m["events"]:
		if e.has("step"):
			_on_step(e["step"])
		elif e.has("sources_changed"):
			rebuild = true
		elif e.has("overflow"):
			resync = true  # events were lost: ask again
	_epoch = m["epoch"]
	_seq = _uint(m["through"])
	if rebuild or resync:
		for url in urls:
			build(url, resync)


func _on_step(s):
	var url = s.get("url", "")
	if not url in urls or (profile != "" and s.get("profile", "") != profile):
		return
	var result = s.get("result", "")
	if result == "RAN" or result == "REUSED":
		_stamp[url] = _stamp.get(url, 0) + 1
		for o in s.get("outputs", []):
			_output(url, o, true)
	elif result == "FAILED":
		_stamp[url] = _stamp.get(url, 0) + 1
		emit_signal("step_failed", url, s.get("error", ""))


func _output(url, o, fresh):
	var out = o.duplicate()
	out["abs_path"] = project_dir.plus_file(o.get("path", ""))
	emit_signal("output_built", url, out, fresh)


# A 64-bit number of the JSON: a number up to 2^53, a decimal string past
# it (docs/ui.md). Sequence numbers stay far below 2^63.
static func _uint(v):
	return v.to_int() if typeof(v) == TYPE_STRING else int(v)


# The status's event_epoch as 16 hex digits, as the websocket's since=
# takes it. Past 2^53 it is a decimal string, and may be past 2^63 (the
# largest GDScript int): long division by 16 on its digits.
static func _hex16(v):
	if typeof(v) != TYPE_STRING:
		return "%016x" % int(v)
	return _dec_to_hex16(v)


static func _dec_to_hex16(dec):
	var digits = []
	for c in dec:
		digits.append(int(c))
	var hex = ""
	for _i in range(16):
		var rem = 0
		var next = []
		for d in digits:
			var v = rem * 10 + d
			if next.size() > 0 or v / 16 > 0:
				next.append(v / 16)
			rem = v % 16
		hex = "0123456789abcdef"[rem] + hex
		digits = next
	return hex
