/* log.c — the daemon's log: one line per thing worth knowing, written
 * whole with one write(2) to <project>/.kiln/kilnd.log (or stderr in the
 * foreground), and the same text published as a LogLine event so that
 * editors see it too.
 *
 * A line a client can cause at will goes through kilnd_log_limited: at
 * most one a second per kind, the others counted and the count told with
 * the next one.
 *
 * Threads: any. log_mu orders the writes and guards the limiters; events.c
 * locks itself. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "events.h"
#include "kilnd.h"

int
kilnd_log_open(struct kilnd *d)
{
	if (d->cfg.foreground) {
		d->log_fd = STDERR_FILENO;
		return 0;
	}
	d->log_fd = open(d->paths.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
	                 0600);
	if (d->log_fd < 0)
		return kiln_err_from_errno(errno);
	/* Anything else the process prints (a sanitizer's report, a library's
	 * complaint) lands in the log too, never on a terminal it left. */
	dup2(d->log_fd, STDOUT_FILENO);
	dup2(d->log_fd, STDERR_FILENO);
	return 0;
}

void
kilnd_log_close(struct kilnd *d)
{
	if (d->log_fd > STDERR_FILENO)
		close(d->log_fd);
	d->log_fd = -1;
}

static const char *
level_name(enum kilnd_level level)
{
	switch (level) {
	case KILND_INFO: return "info";
	case KILND_WARNING: return "warning";
	case KILND_ERROR: return "error";
	case KILND_DEBUG: return "debug";
	}
	return "?";
}

/* Publish text as a LogLine event. */
static void
log_event(struct kilnd *d, enum kilnd_level level, char *text)
{
	Kiln__Event e = KILN__EVENT__INIT;
	Kiln__LogLine l = KILN__LOG_LINE__INIT;

	l.level = level == KILND_ERROR     ? KILN__LOG_LINE__LEVEL__ERROR :
	          level == KILND_WARNING   ? KILN__LOG_LINE__LEVEL__WARNING :
	                                     KILN__LOG_LINE__LEVEL__INFO;
	l.text = text;
	e.kind_case = KILN__EVENT__KIND_LOG;
	e.log = &l;
	events_publish(d->events, &e); /* a full ring drops old events, not this */
}

/* Write text as one log line, and publish it unless it is DEBUG. */
static void
log_text(struct kilnd *d, enum kilnd_level level, char *text)
{
	char line[1024], stamp[32];
	struct timespec ts;
	struct tm tm;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	n = snprintf(line, sizeof(line), "%s.%03ld kilnd[%ld] %s: %s\n", stamp,
	             ts.tv_nsec / 1000000, (long)getpid(), level_name(level), text);
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	if (d->log_fd >= 0) {
		pthread_mutex_lock(&d->log_mu);
		if (write(d->log_fd, line, (size_t)n) < 0) {
			/* nowhere left to say so */
		}
		pthread_mutex_unlock(&d->log_mu);
	}
	if (d->events != NULL && level != KILND_DEBUG)
		log_event(d, level, text);
}

void
kilnd_log(struct kilnd *d, enum kilnd_level level, const char *fmt, ...)
{
	char text[900];
	va_list ap;

	if (level == KILND_DEBUG && !d->verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	log_text(d, level, text);
}

/* Whether rl lets a line through now; if so, *left_out is how many it
 * counted instead since the last one. */
static int
limit_pass(struct kilnd *d, struct kilnd_ratelimit *rl, uint64_t *left_out)
{
	int64_t now = kiln_mono_ns();
	int pass;

	pthread_mutex_lock(&d->log_mu);
	if ((pass = now >= rl->next_ns)) {
		*left_out = rl->suppressed;
		rl->suppressed = 0;
		rl->next_ns = now + 1000000000;
	} else {
		rl->suppressed++;
	}
	pthread_mutex_unlock(&d->log_mu);
	return pass;
}

void
kilnd_log_limited(struct kilnd *d, struct kilnd_ratelimit *rl,
                  enum kilnd_level level, const char *fmt, ...)
{
	char text[900];
	uint64_t left_out = 0;
	va_list ap;
	int n;

	if ((level == KILND_DEBUG && !d->verbose) ||
	    !limit_pass(d, rl, &left_out))
		return;
	va_start(ap, fmt);
	n = vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (left_out > 0 && n >= 0 && (size_t)n < sizeof(text))
		snprintf(text + n, sizeof(text) - (size_t)n, " (and %" PRIu64
		         " more like it, not logged)", left_out);
	log_text(d, level, text);
}
