tool
extends EditorPlugin
# plugin.gd — kiln in the Godot editor: a dock that follows the project's
# kiln daemon with the same client as the game (kiln_client.gd, same
# settings). Saving a source builds the followed steps again; an output
# kiln writes under this Godot project (a kiln project whose build/ folder
# is inside it) is reimported at once, so the editor's views show the new
# texture without waiting for the window to get focus. Outputs elsewhere
# are listed; the running game reloads them itself (the Kiln autoload).
#
# Its lines go to the dock and to the editor's Output (stdout):
#   kiln (editor): built sprites/hero build/pc/sprites/hero.png id=<hash>
#   kiln (editor): reimported res://build/pc/sprites/hero.png 80x40 id=<hash>
#   kiln (editor): failed sprites/hero: <the tool's first line>

const KilnClient = preload("res://addons/kiln/kiln_client.gd")
const MAX_LINES = 200

var _client = null
var _dock = null
var _status = null
var _log = null
var _pending = {}            # res:// path -> kiln's id, until reimported
var _rescan = false          # a scan is due once the one running ends


func _enter_tree():
	_dock = VBoxContainer.new()
	_dock.name = "kiln"
	_status = Label.new()
	_status.text = "connecting..."
	_dock.add_child(_status)
	_log = ItemList.new()
	_log.size_flags_vertical = Control.SIZE_EXPAND_FILL
	_dock.add_child(_log)
	add_control_to_dock(DOCK_SLOT_RIGHT_BL, _dock)

	var fs = get_editor_interface().get_resource_filesystem()
	fs.connect("resources_reimported", self, "_on_reimported")
	_client = KilnClient.new()
	_client.configure()
	_client.connect("connected", self, "_on_connected")
	_client.connect("disconnected", self, "_on_disconnected")
	_client.connect("output_built", self, "_on_output")
	_client.connect("step_failed", self, "_on_failed")
	_client.connect("message", self, "_line")
	add_child(_client)
	set_process(true)


func _exit_tree():
	get_editor_interface().get_resource_filesystem().disconnect(
		"resources_reimported", self, "_on_reimported")
	remove_control_from_docks(_dock)
	_dock.queue_free()
	_client.queue_free()


func _on_connected(_base):
	_status.text = "following %s (%d steps)" % [_client.project_dir, _client.urls.size()]
	_line("following %s" % PoolStringArray(_client.urls).join(", "))


func _on_disconnected(reason):
	_status.text = reason + "; reconnecting"


func _on_failed(url, error):
	_line("failed %s: %s" % [url, error.strip_edges().split("\n")[0]])


func _on_output(url, out, fresh):
	if not fresh:
		return
	_line("built %s %s id=%s" % [url, out["path"], out["id"]])
	var res = ProjectSettings.localize_path(out["abs_path"])
	if res.begins_with("res://"):
		_pending[res] = out["id"]
		_rescan = true


# A scan finds the changed file and reimports it. One already running
# (the editor's first, say) may have read the folder before kiln wrote
# the file, and a scan asked for meanwhile is dropped: so scan after it.
func _process(_delta):
	var fs = get_editor_interface().get_resource_filesystem()
	if _rescan and not fs.is_scanning():
		_rescan = false
		fs.scan()


func _on_reimported(paths):
	for res in paths:
		if not _pending.has(res):
			continue
		var tex = load(res)
		var size = tex.get_size() if tex is Texture else Vector2()
		_line("reimported %s %dx%d id=%s" % [res, size.x, size.y, _pending[res]])
		_pending.erase(res)


func _line(text):
	print("kiln (editor): " + text)
	_log.add_item(text)
	while _log.get_item_count() > MAX_LINES:
		_log.remove_item(0)
