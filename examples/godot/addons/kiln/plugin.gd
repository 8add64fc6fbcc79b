tool
extends EditorPlugin
# plugin.gd — kiln in the Godot editor: a dock that follows the project's
# kiln daemon with the same client as the game (kiln_client.gd). Saving a
# source builds the followed steps again (kiln/textures in the project
# settings); an output kiln writes under this Godot project (a kiln project
# whose build/ folder is inside it) is reimported at once, so the editor's
# views show the new texture without waiting for the window to get focus.
# Outputs elsewhere are listed; the running game reloads them itself (the
# Kiln autoload, kiln.gd).

const KilnClient = preload("res://addons/kiln/kiln_client.gd")
const MAX_LINES = 200

var _client = null
var _dock = null
var _status = null
var _log = null


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

	_client = KilnClient.new()
	var dir = str(ProjectSettings.get_setting("kiln/project")) if ProjectSettings.has_setting("kiln/project") else ""
	var here = ProjectSettings.globalize_path("res://")
	_client.project_dir = here if dir == "" else (here.plus_file(dir) if dir.is_rel_path() else dir)
	if ProjectSettings.has_setting("kiln/profile"):
		_client.profile = str(ProjectSettings.get_setting("kiln/profile"))
	if ProjectSettings.has_setting("kiln/textures"):
		_client.urls = Array(ProjectSettings.get_setting("kiln/textures"))
	if OS.get_environment("KILN") != "":
		_client.kiln_bin = OS.get_environment("KILN")
	_client.connect("connected", self, "_on_connected")
	_client.connect("disconnected", self, "_on_disconnected")
	_client.connect("output_built", self, "_on_output")
	_client.connect("step_failed", self, "_on_failed")
	_client.connect("message", self, "_line")
	add_child(_client)


func _exit_tree():
	remove_control_from_docks(_dock)
	_dock.queue_free()
	_client.queue_free()


func _on_connected(_base):
	_status.text = "following %s (%d steps)" % [_client.project_dir, _client.urls.size()]


func _on_disconnected(reason):
	_status.text = reason + "; reconnecting"


func _on_failed(url, error):
	_line("failed %s: %s" % [url, error.split("\n")[0]])


func _on_output(url, out, fresh):
	if not fresh:
		return
	_line("built %s: %s" % [url, out["path"]])
	var res = ProjectSettings.localize_path(out["abs_path"])
	if res.begins_with("res://"):
		# the changed file is found and reimported by a scan
		get_editor_interface().get_resource_filesystem().scan()


func _line(text):
	_log.add_item(text)
	while _log.get_item_count() > MAX_LINES:
		_log.remove_item(0)
