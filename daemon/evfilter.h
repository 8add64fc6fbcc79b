/* evfilter.h — a subscription's filter (SubscribeRequest.urls, .profile):
 * which events the daemon sends one subscriber. kiln.proto's comment above
 * SubscribeRequest is the contract; this is its one implementation.
 *
 * Threads: a filter is read-only once made; events.c matches it under its
 * lock, any thread may. */
#ifndef KILND_EVFILTER_H
#define KILND_EVFILTER_H

#include <stddef.h>

#include "kiln_proto.h"

struct ev_filter;

/* The filter req asks for into *fp: NULL when req asks for none (every
 * event passes). Returns 0, KILN_ENOMEM, or KILN_EINVAL with why (whylen
 * bytes) saying what is wrong: more than KILN_FILTER_MAX_URLS globs, a
 * malformed glob or one over KILN_GLOB_MAX bytes, a profile over
 * KILN_FILTER_MAX_PROFILE bytes. */
int evfilter_new(const Kiln__SubscribeRequest *req, struct ev_filter **fp,
                 char *why, size_t whylen);

/* NULL is allowed. */
void evfilter_free(struct ev_filter *f);

/* The filter as subscribed: its profile ("": any) and its URL globs (none:
 * any), borrowed from f. NULL f: any event. */
void evfilter_describe(const struct ev_filter *f, const char **profile,
                       char *const **urls, size_t *n);

/* 1 when a step of profile and url passes f (NULL: every step): what a
 * subscription's snapshot holds (events.h). */
int evfilter_pass_step(const struct ev_filter *f, const char *profile,
                       const char *url);

/* 1 when e goes to a subscriber filtered by f (NULL: every event). */
int evfilter_pass(const struct ev_filter *f, const Kiln__Event *e);

#endif
