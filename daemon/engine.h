/* engine.h — kiln's build engine (docs/build.md). */
#ifndef KILND_ENGINE_H
#define KILND_ENGINE_H

/* The tag every action key's encoding starts with. */
extern const char engine_key_format[];

#endif
