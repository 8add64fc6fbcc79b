/* action_key_version.c — the version of the build engine's action-key encoding
 * (docs/build.md). Bumping it gives every step a new key: nothing cached
 * under the old encoding is reused. */
#include "engine.h"

const char engine_key_format[] = "kiln-action-1";
