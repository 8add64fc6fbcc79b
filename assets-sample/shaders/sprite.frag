#version 450
#extension GL_GOOGLE_include_directive : require
#include "include/common.glsl"

layout(set = 1, binding = 0) uniform sampler2D sprite_tex;
layout(location = 0) in vec2 v_uv;
layout(location = 0) out vec4 out_color;

void main()
{
	out_color = apply_tint(texture(sprite_tex, v_uv));
}
