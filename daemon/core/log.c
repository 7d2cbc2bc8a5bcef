/*
 * log.c - implementation of log.h.
 *
 * A library message keeps the library's own severity mapped to syslog's:
 * gRPC ERROR/INFO/DEBUG -> err/info/debug, libnetconf2 ERROR/WARNING/
 * VERBOSE/DEBUG -> err/warning/info/debug, libevent ERR/WARN/MSG/DEBUG ->
 * err/warning/info/debug. write(2) results on stderr are not checked: a
 * log line that cannot be written has nowhere else to go.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <grpc/support/log.h>
#include <nc_client.h>
#include <systemd/sd-journal.h>

#define LOG_LINE_MAX	   2048
#define LOG_JOURNAL_SOCKET "/run/systemd/journal/socket"

static bool journal; /* set once by log_init */

static const char *const prio_names[] = {"emerg",   "alert",  "crit", "err",
					 "warning", "notice", "info", "debug"};

void log_init(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	/* sd_journal_send() drops entries silently when journald's socket is
	 * gone: stderr is used unless the socket is there too. */
	journal = js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
		  fstat(STDERR_FILENO, &st) == 0 && (unsigned long long)st.st_dev == dev &&
		  (unsigned long long)st.st_ino == ino && access(LOG_JOURNAL_SOCKET, W_OK) == 0;
}

bool log_to_journal(void)
{
	return journal;
}

/* One entry: under journald with its fields, else one stderr line. */
static void emit(int prio, const char *source, const char *job_id, const char *client_cn,
		 const char *text)
{
	char line[LOG_LINE_MAX + 128];
	struct timespec ts;
	struct tm tm;
	int n;

	if (prio < LOG_EMERG || prio > LOG_DEBUG)
		prio = LOG_ERR;
	/* an entry the journal refuses becomes a stderr line */
	if (journal &&
	    sd_journal_send("MESSAGE=%s%s%s", source ? source : "", source ? ": " : "", text,
			    "PRIORITY=%d", prio, "OCSD_SOURCE=%s", source ? source : "ocsd",
			    "OCSD_JOB_ID=%s", job_id ? job_id : "", "OCSD_CLIENT_CN=%s",
			    client_cn ? client_cn : "", NULL) >= 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line),
		     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ocsd[%ld] <%d> %s: %s%s%s\n",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     ts.tv_nsec / 1000000, (long)getpid(), prio, prio_names[prio],
		     source ? source : "", source ? ": " : "", text);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	(void)!write(STDERR_FILENO, line, (size_t)n);
}

/* Formats into text, a message cut at LOG_LINE_MAX, with newlines made spaces. */
static void vformat(char *text, size_t size, const char *fmt, va_list ap)
{
	vsnprintf(text, size, fmt, ap);
	for (char *p = text; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
}

void log_msg(int prio, const char *fmt, ...)
{
	char text[LOG_LINE_MAX];
	va_list ap;

	va_start(ap, fmt);
	vformat(text, sizeof(text), fmt, ap);
	va_end(ap);
	emit(prio, NULL, NULL, NULL, text);
}

void log_job(int prio, const char *job_id, const char *client_cn, const char *fmt, ...)
{
	char text[LOG_LINE_MAX], line[LOG_LINE_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	vformat(text, sizeof(text), fmt, ap);
	va_end(ap);
	if (journal) {
		emit(prio, NULL, job_id, client_cn, text);
		return;
	}
	snprintf(line, sizeof(line), "%s (job %s, client %s)", text,
		 job_id && job_id[0] ? job_id : "-", client_cn && client_cn[0] ? client_cn : "-");
	emit(prio, NULL, NULL, NULL, line);
}

static void from_grpc(gpr_log_func_args *a)
{
	int prio = a->severity == GPR_LOG_SEVERITY_ERROR  ? LOG_ERR
		   : a->severity == GPR_LOG_SEVERITY_INFO ? LOG_INFO
							  : LOG_DEBUG;

	emit(prio, "grpc", NULL, NULL, a->message ? a->message : "");
}

static void from_netconf(const struct nc_session *session, NC_VERB_LEVEL level, const char *msg)
{
	int prio = level == NC_VERB_ERROR     ? LOG_ERR
		   : level == NC_VERB_WARNING ? LOG_WARNING
		   : level == NC_VERB_VERBOSE ? LOG_INFO
					      : LOG_DEBUG;

	emit(prio, "libnetconf2", NULL, NULL, msg ? msg : "");
}

static void from_libevent(int severity, const char *msg)
{
	int prio = severity == EVENT_LOG_ERR	? LOG_ERR
		   : severity == EVENT_LOG_WARN ? LOG_WARNING
		   : severity == EVENT_LOG_MSG	? LOG_INFO
						: LOG_DEBUG;

	emit(prio, "libevent", NULL, NULL, msg ? msg : "");
}

void log_route_libraries(void)
{
	gpr_set_log_function(from_grpc);
	nc_set_print_clb_session(from_netconf);
	event_set_log_callback(from_libevent);
}
