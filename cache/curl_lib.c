/* curl_lib.c — libcurl loaded on first use (curl_lib.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "curl_lib.h"
#include "kiln_error.h"

const struct curl_lib *curl_fn;

static struct curl_lib lib;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_err[256];

/* Each member of struct curl_lib with its libcurl name, in order. */
#define F(member, name) {offsetof(struct curl_lib, member), name}
static const struct { size_t off; const char *name; } table[] = {
	F(global_init, "curl_global_init"),
	F(easy_init, "curl_easy_init"),
	F(easy_setopt, "curl_easy_setopt"),
	F(easy_getinfo, "curl_easy_getinfo"),
	F(easy_cleanup, "curl_easy_cleanup"),
	F(multi_init, "curl_multi_init"),
	F(multi_setopt, "curl_multi_setopt"),
	F(multi_add_handle, "curl_multi_add_handle"),
	F(multi_remove_handle, "curl_multi_remove_handle"),
	F(multi_perform, "curl_multi_perform"),
	F(multi_poll, "curl_multi_poll"),
	F(multi_wakeup, "curl_multi_wakeup"),
	F(multi_info_read, "curl_multi_info_read"),
	F(multi_cleanup, "curl_multi_cleanup"),
	F(slist_append, "curl_slist_append"),
	F(slist_free_all, "curl_slist_free_all"),
};
#undef F

static void
load(void)
{
	void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);

	if (h == NULL) {
		snprintf(load_err, sizeof load_err, "loading libcurl: %s", dlerror());
		return;
	}
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		void *f = dlsym(h, table[i].name);
		if (f == NULL) {
			snprintf(load_err, sizeof load_err, "libcurl.so.4 lacks %s",
			         table[i].name);
			return;   /* h stays loaded: harmless, never used */
		}
		/* POSIX: a function pointer converts to and from void * */
		memcpy((char *)&lib + table[i].off, &f, sizeof f);
	}
	if (lib.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(load_err, sizeof load_err, "curl_global_init failed");
		return;
	}
	curl_fn = &lib;
}

int
curl_lib_load(char *err, size_t errlen)
{
	if (pthread_once(&load_once, load) != 0 || curl_fn == NULL) {
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "%s", load_err[0] ? load_err : "libcurl not loaded");
		return KILN_EIO;
	}
	return 0;
}
