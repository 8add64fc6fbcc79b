/* cache_env.h — the shared cache's settings in kilnd's environment
 * (KILN_CACHE_*; docs/cache.md, "Configuration"), checked before the
 * engine starts. */
#ifndef KILND_CACHE_ENV_H
#define KILND_CACHE_ENV_H

#include <stddef.h>

#include "engine.h"

/* Fill *ce from the environment (getenv's strings: valid while nothing
 * changes the environment, i.e. for the daemon's life). An empty value
 * counts as not given. A value that is not what its variable takes is
 * refused like a bad flag, with err saying which: KILN_EINVAL. */
int cache_env_read(struct engine_cache_env *ce, char *err, size_t len);

#endif
