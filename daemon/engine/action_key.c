/* action_key.c — key parts, the action key's encoding, and what changed
 * between two keys (see action_key.h; docs/build.md has the encoding). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "action_key.h"

void
key_parts_init(struct key_parts *kp)
{
	memset(kp, 0, sizeof *kp);
}

void
key_parts_free(struct key_parts *kp)
{
	for (size_t i = 0; i < kp->n; i++) {
		free(kp->v[i].label);
		free(kp->v[i].text);
	}
	free(kp->v);
	key_parts_init(kp);
}

static struct key_part *
part_new(struct key_parts *kp, const char *prefix, const char *name)
{
	size_t lp = strlen(prefix), ln = strlen(name);
	struct key_part *p;

	if (kp->n == kp->cap) {
		size_t ncap = kp->cap ? kp->cap * 2 : 16;
		struct key_part *nv = realloc(kp->v, ncap * sizeof *nv);
		if (nv == NULL)
			return NULL;
		kp->v = nv;
		kp->cap = ncap;
	}
	p = &kp->v[kp->n];
	memset(p, 0, sizeof *p);
	if ((p->label = malloc(lp + ln + 1)) == NULL)
		return NULL;
	memcpy(p->label, prefix, lp);
	memcpy(p->label + lp, name, ln + 1);
	kp->n++;
	return p;
}

int
key_parts_text2(struct key_parts *kp, const char *prefix, const char *name,
                const char *text)
{
	struct key_part *p = part_new(kp, prefix, name);

	if (p == NULL || (p->text = strdup(text)) == NULL)
		return KILN_ENOMEM;
	return 0;
}

int
key_parts_hash2(struct key_parts *kp, const char *prefix, const char *name,
                const kiln_id *id)
{
	struct key_part *p = part_new(kp, prefix, name);

	if (p == NULL)
		return KILN_ENOMEM;
	p->is_hash = 1;
	p->hash = *id;
	return 0;
}

int
key_parts_text(struct key_parts *kp, const char *label, const char *text)
{
	return key_parts_text2(kp, "", label, text);
}

int
key_parts_hash(struct key_parts *kp, const char *label, const kiln_id *id)
{
	return key_parts_hash2(kp, "", label, id);
}

void
key_parts_drop(struct key_parts *kp, const char *label)
{
	size_t at = 0;

	for (size_t i = 0; i < kp->n; i++) {
		if (strcmp(kp->v[i].label, label) == 0) {
			free(kp->v[i].label);
			free(kp->v[i].text);
			continue;
		}
		kp->v[at++] = kp->v[i];
	}
	kp->n = at;
}

static int
part_cmp(const void *a, const void *b)
{
	return strcmp(((const struct key_part *)a)->label,
	              ((const struct key_part *)b)->label);
}

static void
feed_u32(kiln_hasher *h, uint32_t v)
{
	uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16),
	                (uint8_t)(v >> 24)};

	kiln_hasher_update(h, b, 4);
}

/* The encoding (docs/build.md): the format tag and '\n', then per part in
 * label order: u32le label length, label, one type byte ('h' hash, 't'
 * text), u32le value length, value. Lengths make it unambiguous whatever
 * bytes labels and values hold. */
int
key_parts_key(struct key_parts *kp, kiln_id *key)
{
	kiln_hasher *h;
	int rv;

	if (kp->n > 1)
		qsort(kp->v, kp->n, sizeof *kp->v, part_cmp);
	if ((rv = kiln_hasher_new(&h)) != 0)
		return rv;
	kiln_hasher_update(h, engine_key_format, strlen(engine_key_format));
	kiln_hasher_update(h, "\n", 1);
	for (size_t i = 0; i < kp->n; i++) {
		const struct key_part *p = &kp->v[i];
		size_t ll = strlen(p->label);
		feed_u32(h, (uint32_t)ll);
		kiln_hasher_update(h, p->label, ll);
		if (p->is_hash) {
			kiln_hasher_update(h, "h", 1);
			feed_u32(h, 16);
			kiln_hasher_update(h, p->hash.b, 16);
		} else {
			size_t tl = strlen(p->text);
			kiln_hasher_update(h, "t", 1);
			feed_u32(h, (uint32_t)tl);
			kiln_hasher_update(h, p->text, tl);
		}
	}
	kiln_hasher_digest(h, key);
	kiln_hasher_free(h);
	return 0;
}

/* One KeyPart and its strings in a single malloc'd block. */
static Kiln__KeyPart *
pb_part_new(const char *label, const uint8_t *hash, const char *text)
{
	size_t ll = strlen(label) + 1, tl = text ? strlen(text) + 1 : 1;
	Kiln__KeyPart *p = malloc(sizeof *p + ll + tl + (hash ? 16 : 0));
	char *s;

	if (p == NULL)
		return NULL;
	kiln__key_part__init(p);
	s = (char *)(p + 1);
	memcpy(s, label, ll);
	p->label = s;
	s += ll;
	if (text != NULL)
		memcpy(s, text, tl);
	else
		*s = '\0';
	p->text = s;
	s += tl;
	if (hash != NULL) {
		memcpy(s, hash, 16);
		p->hash.data = (uint8_t *)s;
		p->hash.len = 16;
	}
	return p;
}

int
key_parts_to_pb(const struct key_parts *kp, Kiln__KeyPart ***out, size_t *n)
{
	Kiln__KeyPart **v = calloc(kp->n + 1, sizeof *v);

	if (v == NULL)
		return KILN_ENOMEM;
	for (size_t i = 0; i < kp->n; i++) {
		const struct key_part *p = &kp->v[i];
		v[i] = pb_part_new(p->label, p->is_hash ? p->hash.b : NULL,
		                   p->is_hash ? NULL : p->text);
		if (v[i] == NULL) {
			key_parts_pb_free(v);
			return KILN_ENOMEM;
		}
	}
	*out = v;
	*n = kp->n;
	return 0;
}

void
key_parts_pb_free(Kiln__KeyPart **parts)
{
	if (parts == NULL)
		return;
	for (size_t i = 0; parts[i] != NULL; i++)
		free(parts[i]);
	free(parts);
}

void
key_part_show(const Kiln__KeyPart *p, char *out, size_t outlen)
{
	char hex[KILN_ID_HEX_LEN + 1];
	size_t j = 0;

	if (outlen == 0)
		return;
	if (p->hash.len == 16) {
		kiln_id id;
		memcpy(id.b, p->hash.data, 16);
		kiln_id_to_hex(&id, hex);
		snprintf(out, outlen, "%.8s", hex);
		return;
	}
	/* Item separators print as spaces; long texts end in "...". */
	for (const char *s = p->text ? p->text : ""; *s && j + 1 < outlen; s++)
		out[j++] = *s == '\x1f' ? ' ' : *s;
	out[j] = '\0';
	if (p->text && strlen(p->text) >= outlen && outlen > 4)
		memcpy(out + outlen - 4, "...", 4);
}

static int
part_equal(const Kiln__KeyPart *a, const struct key_part *b)
{
	if (b->is_hash)
		return a->hash.len == 16 && memcmp(a->hash.data, b->hash.b, 16) == 0;
	return a->hash.len == 0 && strcmp(a->text ? a->text : "", b->text) == 0;
}

static Kiln__KeyPart *
pb_of_part(const struct key_part *p)
{
	return pb_part_new(p->label, p->is_hash ? p->hash.b : NULL,
	                   p->is_hash ? NULL : p->text);
}

static Kiln__KeyPart *
pb_copy(const Kiln__KeyPart *p)
{
	return pb_part_new(p->label, p->hash.len == 16 ? p->hash.data : NULL,
	                   p->hash.len == 16 ? NULL : p->text);
}

/* Text t[from, to) into out (outlen > 8), "..." where something is left
 * out before or after; item separators print as spaces. */
static void
text_window(const char *t, size_t from, size_t to, char *out, size_t outlen)
{
	size_t j = 0;
	int cut = to < strlen(t);

	if (from > 0)
		j = (size_t)snprintf(out, outlen, "...");
	for (size_t i = from; i < to; i++) {
		if (j + 1 >= outlen) {
			cut = 1;
			break;
		}
		out[j++] = t[i] == '\x1f' ? ' ' : t[i];
	}
	if (cut && j + 4 > outlen)
		j = outlen - 4;
	memcpy(out + j, cut ? "..." : "", cut ? 4 : 1);
}

/* Two texts as key_part_show would print them, but where either is too
 * long to print whole, both shown around where they differ (an argv
 * changed at its end read "cat ${in} > ... -> cat ${in} > ..."). */
static void
texts_show(const char *a, const char *b, char *oa, char *ob, size_t outlen)
{
	size_t la = strlen(a), lb = strlen(b), pre = 0, suf = 0, from;
	const size_t ctx = 12;

	if (la < outlen && lb < outlen) {
		text_window(a, 0, la, oa, outlen);
		text_window(b, 0, lb, ob, outlen);
		return;
	}
	while (pre < la && pre < lb && a[pre] == b[pre])
		pre++;
	while (suf < la - pre && suf < lb - pre && a[la - 1 - suf] == b[lb - 1 - suf])
		suf++;
	from = pre > ctx ? pre - ctx : 0;
	text_window(a, from, la - suf + ctx < la ? la - suf + ctx : la, oa, outlen);
	text_window(b, from, lb - suf + ctx < lb ? lb - suf + ctx : lb, ob, outlen);
}

/* Append "label a -> b" to the reason while it has room. A declared
 * prerequisite's outputs are labelled "need URL" in keys (the label is
 * hashed: renaming it would change every key), but shown as
 * "prerequisite URL", the name kiln deps and the docs use ("need" is
 * kiln need's). */
static void
reason_add(char *reason, size_t len, size_t nth, const Kiln__KeyPart *before,
           const Kiln__KeyPart *after)
{
	char a[48], b[48], line[160 + 600];
	size_t used = strlen(reason);
	const char *label = before ? before->label : after->label;
	char shown[600];

	if (strncmp(label, "need ", 5) == 0) {
		snprintf(shown, sizeof shown, "prerequisite %s", label + 5);
		label = shown;
	}

	if (nth == 3) {
		snprintf(line, sizeof line, "%s...", used ? "; " : "");
	} else if (nth > 3) {
		return;
	} else if (before == NULL) {
		key_part_show(after, b, sizeof b);
		snprintf(line, sizeof line, "%snew %s (%s)", used ? "; " : "", label, b);
	} else if (after == NULL) {
		snprintf(line, sizeof line, "%s%s removed", used ? "; " : "", label);
	} else {
		if (before->hash.len == 0 && after->hash.len == 0) {
			texts_show(before->text ? before->text : "",
			           after->text ? after->text : "", a, b, sizeof a);
		} else {
			key_part_show(before, a, sizeof a);
			key_part_show(after, b, sizeof b);
		}
		snprintf(line, sizeof line, "%s%s changed %s -> %s", used ? "; " : "",
		         label, a, b);
	}
	if (used + strlen(line) + 1 <= len)
		memcpy(reason + used, line, strlen(line) + 1);
}

static int
change_add(Kiln__KeyChange **v, size_t *n, size_t max, const Kiln__KeyPart *before,
           const struct key_part *after)
{
	Kiln__KeyChange *c;

	if (*n >= max)
		return 0;
	if ((c = malloc(sizeof *c)) == NULL)
		return KILN_ENOMEM;
	kiln__key_change__init(c);
	v[(*n)++] = c;
	c->before = before ? pb_copy(before) : NULL;
	c->after = after ? pb_of_part(after) : NULL;
	if ((before && c->before == NULL) || (after && c->after == NULL))
		return KILN_ENOMEM;
	c->label = before ? c->before->label : c->after->label;
	return 0;
}

int
key_parts_diff(Kiln__KeyPart *const *old, size_t nold,
               const struct key_parts *kp, size_t max,
               Kiln__KeyChange ***changes, size_t *nchanges,
               char *reason, size_t reasonlen)
{
	Kiln__KeyChange **v = calloc(max + 1, sizeof *v);
	size_t i = 0, j = 0, n = 0, total = 0;
	int rv = 0;

	if (v == NULL)
		return KILN_ENOMEM;
	if (reasonlen > 0)
		reason[0] = '\0';
	while ((i < nold || j < kp->n) && rv == 0) {
		int c = i == nold ? 1 : j == kp->n ? -1 :
		        strcmp(old[i]->label, kp->v[j].label);
		if (c == 0 && part_equal(old[i], &kp->v[j])) {
			i++, j++;
			continue;
		}
		if (c < 0) {          /* gone */
			reason_add(reason, reasonlen, total, old[i], NULL);
			rv = change_add(v, &n, max, old[i++], NULL);
		} else if (c > 0) {   /* new */
			Kiln__KeyPart *after = pb_of_part(&kp->v[j]);
			if (after == NULL) {
				rv = KILN_ENOMEM;
				break;
			}
			reason_add(reason, reasonlen, total, NULL, after);
			free(after);
			rv = change_add(v, &n, max, NULL, &kp->v[j++]);
		} else {              /* changed */
			Kiln__KeyPart *after = pb_of_part(&kp->v[j]);
			if (after == NULL) {
				rv = KILN_ENOMEM;
				break;
			}
			reason_add(reason, reasonlen, total, old[i], after);
			free(after);
			rv = change_add(v, &n, max, old[i++], &kp->v[j++]);
		}
		total++;
	}
	if (rv != 0) {
		key_changes_free(v);
		return rv;
	}
	*changes = v;
	*nchanges = n;
	return (int)total;
}

void
key_changes_free(Kiln__KeyChange **changes)
{
	if (changes == NULL)
		return;
	for (size_t i = 0; changes[i] != NULL; i++) {
		free(changes[i]->before);
		free(changes[i]->after);
		free(changes[i]);
	}
	free(changes);
}
