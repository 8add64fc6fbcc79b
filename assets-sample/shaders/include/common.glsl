// Shared by every shader of the sample: the per-frame uniform block and a
// tint helper. Not matched by the shader rule (it is no .vert or .frag):
// glslangValidator's depfile tells kiln which shaders include it.
layout(set = 0, binding = 0) uniform Frame {
	mat4 view_proj;
	vec4 tint;
	float time;
} frame;

vec4 apply_tint(vec4 color)
{
	return vec4(color.rgb * frame.tint.rgb, color.a * frame.tint.a);
}
