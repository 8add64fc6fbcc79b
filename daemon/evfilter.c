/* evfilter.c — a subscription's filter: URL globs (kiln build's syntax,
 * desc/glob.h: a subscriber names assets as it names them to build) and a
 * profile, compiled once when it subscribes and matched against each event
 * (evfilter.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evfilter.h"
#include "glob.h"

struct ev_filter {
	kiln_glob **globs; /* nglobs compiled URL globs; none: any URL */
	char **texts;      /* the globs as subscribed (kiln status shows them) */
	size_t nglobs;
	char *profile;     /* NULL: any profile */
};

void
evfilter_free(struct ev_filter *f)
{
	if (f == NULL)
		return;
	for (size_t i = 0; i < f->nglobs; i++) {
		glob_free(f->globs[i]);
		free(f->texts[i]);
	}
	free(f->globs);
	free(f->texts);
	free(f->profile);
	free(f);
}

/* Check req's filter against the limits before anything is compiled, so
 * that a hostile request costs nothing. */
static int
limits_check(const Kiln__SubscribeRequest *req, char *why, size_t whylen)
{
	if (req->n_urls > KILN_FILTER_MAX_URLS) {
		snprintf(why, whylen, "the event filter has %zu URL globs; at most %d",
		         req->n_urls, KILN_FILTER_MAX_URLS);
		return KILN_EINVAL;
	}
	for (size_t i = 0; i < req->n_urls; i++)
		if (strlen(req->urls[i]) > KILN_GLOB_MAX) {
			snprintf(why, whylen, "the event filter's URL glob %zu is %zu "
			         "bytes long; at most %d", i + 1, strlen(req->urls[i]),
			         KILN_GLOB_MAX);
			return KILN_EINVAL;
		}
	if (strlen(req->profile) > KILN_FILTER_MAX_PROFILE) {
		snprintf(why, whylen, "the event filter's profile is %zu bytes long; "
		         "at most %d", strlen(req->profile), KILN_FILTER_MAX_PROFILE);
		return KILN_EINVAL;
	}
	return 0;
}

int
evfilter_new(const Kiln__SubscribeRequest *req, struct ev_filter **fp,
             char *why, size_t whylen)
{
	struct ev_filter *f;
	const char *bad;
	int rv;

	*fp = NULL;
	if ((rv = limits_check(req, why, whylen)) != 0)
		return rv;
	if (req->n_urls == 0 && req->profile[0] == '\0')
		return 0;
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return KILN_ENOMEM;
	rv = KILN_ENOMEM;
	if (req->n_urls > 0 &&
	    ((f->globs = calloc(req->n_urls, sizeof(*f->globs))) == NULL ||
	     (f->texts = calloc(req->n_urls, sizeof(*f->texts))) == NULL))
		goto fail;
	if (req->profile[0] != '\0' && (f->profile = strdup(req->profile)) == NULL)
		goto fail;
	for (; f->nglobs < req->n_urls; f->nglobs++) {
		bad = NULL;
		if ((rv = glob_compile(req->urls[f->nglobs], &f->globs[f->nglobs],
		                       &bad)) != 0) {
			if (rv == KILN_EINVAL)
				snprintf(why, whylen, "the event filter's URL glob '%.60s': %s",
				         req->urls[f->nglobs], bad ? bad : "malformed");
			goto fail;
		}
		if ((f->texts[f->nglobs] = strdup(req->urls[f->nglobs])) == NULL) {
			glob_free(f->globs[f->nglobs]);
			rv = KILN_ENOMEM;
			goto fail;
		}
	}
	*fp = f;
	return 0;
fail:
	evfilter_free(f);
	return rv;
}

void
evfilter_describe(const struct ev_filter *f, const char **profile,
                  char *const **urls, size_t *n)
{
	*profile = f && f->profile ? f->profile : "";
	*urls = f ? f->texts : NULL;
	*n = f ? f->nglobs : 0;
}

/* Whether an event naming profile (and url, when not NULL) passes f. */
static int
names_pass(const struct ev_filter *f, const char *profile, const char *url)
{
	if (f->profile != NULL && strcmp(profile, f->profile) != 0)
		return 0;
	if (url == NULL || f->nglobs == 0)
		return 1;
	for (size_t i = 0; i < f->nglobs; i++)
		if (glob_match(f->globs[i], url))
			return 1;
	return 0;
}

int
evfilter_pass_step(const struct ev_filter *f, const char *profile,
                   const char *url)
{
	return f == NULL || names_pass(f, profile, url);
}

int
evfilter_pass(const struct ev_filter *f, const Kiln__Event *e)
{
	if (f == NULL)
		return 1;
	switch (e->kind_case) {
	case KILN__EVENT__KIND_STEP:
		return names_pass(f, e->step->profile, e->step->url);
	case KILN__EVENT__KIND_STEP_STARTED:
		return names_pass(f, e->step_started->profile, e->step_started->url);
	case KILN__EVENT__KIND_BUILD_FINISHED:
		return names_pass(f, e->build_finished->profile, NULL);
	case KILN__EVENT__KIND_BLOB_STORED:
		/* A put that named no index entry is about no asset. */
		return e->blob_stored->url[0] == '\0' ||
		       names_pass(f, e->blob_stored->profile, e->blob_stored->url);
	default: /* not about one asset or profile: kiln.proto's list */
		return 1;
	}
}
