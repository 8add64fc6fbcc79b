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
# Settings: KilnClient.configure (the command line after `--`, the
# environment, the project settings kiln/*). The URLs of --kiln-texture,
# KILN_TEXTURES or kiln/textures are followed from the start.
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
	client.configure()
	var urls = client.urls
	client.urls = []
	for url in urls:
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
		if client.is_following():
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
