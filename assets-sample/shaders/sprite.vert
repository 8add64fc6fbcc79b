#version 450
#extension GL_GOOGLE_include_directive : require
#include "include/common.glsl"

layout(location = 0) in vec2 in_pos;
layout(location = 1) in vec2 in_uv;
layout(location = 0) out vec2 v_uv;

void main()
{
	v_uv = in_uv;
	gl_Position = frame.view_proj * vec4(in_pos, 0.0, 1.0);
}
