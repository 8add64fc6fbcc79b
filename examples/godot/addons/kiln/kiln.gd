extends Node
# kiln.gd — the autoload "Kiln": textures kiln builds, reloaded in place
# while the game runs.
#
#   $Sprite.texture = Kiln.texture("sprites/hero")
#
# returns an ImageTexture that stays the same object: when kiln rebuilds
# the step, the file it wrote is loaded again into it, so every node
# showing it is redrawn with the new image. The first use of a URL asks
# the daemon to build it and to keep it followed.
#
# Settings, the first found of: the command line after `--`
# (--kiln-project=DIR, --kiln-profile=P, --kiln-texture=URL, repeatable),
# the environment (KILN_PROJECT, KILN_PROFILE, KILN_TEXTURES: URLs
# separated by commas; KILN: the kiln CLI, "kiln" by default) and the
# project settings (kiln/project, relative to this project's folder;
# kiln/profile; kiln/textures). URLs named there are followed from the
# start. The kiln project defaults to this Godot project's own folder.
#
# Prints one line per texture loaded (stdout), which tests and logs read:
#   kiln: loaded sprites/hero 16x8 sha256=<hex> id=<kiln's hash> build/pc/...
#   kiln: reloaded sprites/hero 32x16 sha256=<hex> id=<kiln's hash> build/pc/...
# ("loaded": what was built when the game connected; "reloaded": a build
# the game saw happen).

signal texture_reloaded(url, texture)

const KilnClient = preload("res://addons/kiln/kiln_client.gd")
const IMAGE_EXT = ["png", "jpg", "jpeg", "webp"]

var client = null
var _textures = {}           # url -> ImageTexture
var _ids = {}                # url -> kiln's id of the file loaded


func _ready():
	client = KilnClient.new()
	client.name = "KilnClient"
	client.project_dir = _setting("project", "KILN_PROJECT", "kiln/project")
	if client.project_dir == "":
		client.project_dir = ProjectSettings.globalize_path("res://")
	elif client.project_dir.is_rel_path():
		client.project_dir = ProjectSettings.globalize_path("res://").plus_file(client.project_dir)
	client.profile = _setting("profile", "KILN_PROFILE", "kiln/profile")
	if OS.get_environment("KILN") != "":
		client.kiln_bin = OS.get_environment("KILN")
	for url in _texture_urls():
		texture(url)
	client.connect("connected", self, "_on_connected")
	client.connect("disconnected", self, "_on_disconnected")
	client.connect("output_built", self, "_on_output")
	client.connect("step_failed", self, "_on_failed")
	client.connect("message", self, "_on_message")
	add_child(client)


# The texture kiln builds as url: empty until loaded, then reloaded in place.
func texture(url):
	if not _textures.has(url):
		_textures[url] = ImageTexture.new()
		client.urls.append(url)
		if client.is_inside_tree():
			client.build(url, true)
	return _textures[url]


func _on_connected(base):
	# the URL holds the dashboard's secret: say where, not what
	print("kiln: connected to %s (project %s)" % [base.get_base_dir().get_base_dir(), client.project_dir])


func _on_disconnected(reason):
	print("kiln: disconnected: %s; reconnecting" % reason)


func _on_failed(url, error):
	# keep the texture we have; show why the new one is not there
	print("kiln: failed %s: %s" % [url, error])


func _on_message(text):
	print(text)


func _on_output(url, out, fresh):
	if not _textures.has(url) or not _is_image(out):
		return
	if _ids.get(url, "") == out["id"]:
		return  # this very file is loaded already
	# read once: the hash and the image come from the same bytes, even if
	# a newer build replaces the file meanwhile
	var f = File.new()
	if f.open(out["abs_path"], File.READ) != OK:
		print("kiln: cannot read %s" % out["abs_path"])
		return
	var bytes = f.get_buffer(f.get_len())
	f.close()
	var img = Image.new()
	if _decode(img, bytes, out["path"].get_extension().to_lower()) != OK:
		print("kiln: cannot decode %s" % out["abs_path"])
		return
	var tex = _textures[url]
	tex.create_from_image(img, tex.flags)  # keeps the flags the game set
	_ids[url] = out["id"]
	var ctx = HashingContext.new()
	ctx.start(HashingContext.HASH_SHA256)
	ctx.update(bytes)
	print("kiln: %s %s %dx%d sha256=%s id=%s %s" % ["reloaded" if fresh else "loaded",
		url, tex.get_width(), tex.get_height(), ctx.finish().hex_encode(), out["id"], out["path"]])
	emit_signal("texture_reloaded", url, tex)


static func _is_image(out):
	return out.get("path", "").get_extension().to_lower() in IMAGE_EXT


static func _decode(img, bytes, ext):
	if ext == "png":
		return img.load_png_from_buffer(bytes)
	if ext == "webp":
		return img.load_webp_from_buffer(bytes)
	return img.load_jpg_from_buffer(bytes)


# The command line's --kiln-NAME=V, else the environment's VAR, else the
# project setting.
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


static func _texture_urls():
	var urls = []
	for a in OS.get_cmdline_args():
		if a.begins_with("--kiln-texture="):
			urls.append(a.substr(15, a.length()))
	if urls.empty():
		urls = Array(OS.get_environment("KILN_TEXTURES").split(",", false))
	if urls.empty() and ProjectSettings.has_setting("kiln/textures"):
		urls = Array(ProjectSettings.get_setting("kiln/textures"))
	return urls
