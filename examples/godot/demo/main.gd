extends Node2D
# main.gd — the demo: one Sprite per texture the Kiln autoload follows
# (settings: kiln.gd), side by side. Nothing here knows about reloading:
# the textures are reloaded in place and the sprites redraw.

const GAP = 16


func _ready():
	var x = GAP
	for url in Kiln.client.urls:
		var s = Sprite.new()
		s.centered = false
		s.position = Vector2(x, GAP)
		s.texture = Kiln.texture(url)
		add_child(s)
		x += 256 + GAP
