/* curl_lib.h — libcurl, loaded by the first kiln_cache_open (dlopen of
 * libcurl.so.4) rather than linked: libcurl brings some thirty libraries
 * (TLS stacks, Kerberos, LDAP...), whose loading and symbol binding cost
 * every kiln and kilnd process about 4 ms at start (6.0 ms against 2.0 ms
 * for an empty program linked with and without it), though most of them
 * never use the shared cache. A `kiln need` from inside a tool, a `kiln
 * build` and the daemon's start each paid it.
 *
 * Only the functions cache/ calls are here; add one to struct curl_lib and
 * to curl_lib.c's table together. */
#ifndef KILN_CURL_LIB_H
#define KILN_CURL_LIB_H

#include <curl/curl.h>

struct curl_lib {
	CURLcode (*global_init)(long flags);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
	void (*easy_cleanup)(CURL *h);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_setopt)(CURLM *m, CURLMoption opt, ...);
	CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_perform)(CURLM *m, int *running);
	CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd extra[], unsigned n,
	                        int timeout_ms, int *ret);
	CURLMcode (*multi_wakeup)(CURLM *m);
	CURLMsg *(*multi_info_read)(CURLM *m, int *left);
	CURLMcode (*multi_cleanup)(CURLM *m);
	struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
	void (*slist_free_all)(struct curl_slist *l);
};

/* libcurl's functions, loaded and curl_global_init'ed once per process
 * (never unloaded: curl_global_cleanup must not run while anything might
 * still use it). 0, or KILN_EIO when libcurl.so.4 cannot be loaded or
 * initialized (why in err, when err is not NULL). Thread-safe. */
int curl_lib_load(char *err, size_t errlen);

/* The loaded functions: valid after curl_lib_load returned 0, read-only
 * from then on (set once, inside curl_lib_load's pthread_once). */
extern const struct curl_lib *curl_fn;

#endif
