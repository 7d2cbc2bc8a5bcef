/*
 * test_log.c - ocsd's logger (daemon/core/log.c) off journald: one line format
 * with a UTC timestamp, the pid and the priority, and the messages of gRPC
 * core, libnetconf2 and libevent routed through it with their source named
 * (each library is made to complain for real: an invalid argument to
 * libnetconf2, an fcntl on a closed descriptor in libevent, gpr_log), and
 * JOURNAL_STREAM without journald's socket (a copied environment) not
 * taken for journald: the lines still come out on stderr.
 */
#include <fcntl.h>
#include <regex.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/util.h>
#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <nc_client.h>

#include "log.h"

#define LINE_RE                                                                                    \
	"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z ocsd\\[[0-9]+\\] "     \
	"<[0-7]> (emerg|alert|crit|err|warning|notice|info|debug): "

/* Runs fn with stderr sent to a temporary file; returns what it wrote (caller frees). */
static char *capture(void (*fn)(void))
{
	char path[] = "/tmp/test_log.XXXXXX";
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	char *buf = calloc(1, 65536);
	ssize_t n;

	assert_true(fd >= 0 && saved >= 0 && buf);
	unlink(path);
	fflush(stderr);
	assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
	fn();
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(fd, buf, 65535, 0);
	close(fd);
	assert_true(n >= 0);
	return buf;
}

/* Every line matches LINE_RE; returns the number of lines. */
static int all_lines_formatted(const char *text)
{
	regex_t re;
	int n = 0;
	char *copy = strdup(text), *save = NULL;

	assert_int_equal(regcomp(&re, LINE_RE, REG_EXTENDED | REG_NOSUB), 0);
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (regexec(&re, l, 0, NULL, 0) != 0)
			fail_msg("line not in the one format: '%s'", l);
		n++;
	}
	regfree(&re);
	free(copy);
	return n;
}

static void own_lines(void)
{
	log_msg(LOG_WARNING, "plain %d", 42);
	log_job(LOG_NOTICE, "train-1", "alice", "job %s", "active");
	log_msg(LOG_ERR, "two\nlines");
}

static void test_own_lines(void **state)
{
	char *out = capture(own_lines);

	assert_int_equal(all_lines_formatted(out), 3);
	assert_non_null(strstr(out, "<4> warning: plain 42\n"));
	assert_non_null(strstr(out, "<5> notice: job active (job train-1, client alice)\n"));
	assert_non_null(strstr(out, "<3> err: two lines\n")); /* one line, always */
	free(out);
}

static void library_lines(void)
{
	int fd = open("/dev/null", O_RDONLY);

	close(fd); /* a closed descriptor: libevent warns about its fcntl */
	gpr_log(GPR_ERROR, "grpc says %d", 7);
	assert_null(nc_connect_inout(-1, -1, NULL)); /* libnetconf2: invalid argument */
	assert_int_equal(evutil_make_socket_nonblocking(fd), -1);
}

static void test_library_lines(void **state)
{
	char *out;

	log_route_libraries();
	out = capture(library_lines);
	if (all_lines_formatted(out) < 3)
		fail_msg("fewer than 3 lines:\n%s", out);
	assert_non_null(strstr(out, "<3> err: grpc: grpc says 7\n"));
	if (!strstr(out, "err: libnetconf2: "))
		fail_msg("no libnetconf2 line in:\n%s", out);
	if (!strstr(out, ": libevent: fcntl("))
		fail_msg("no libevent line in:\n%s", out);
	free(out);
}

/* stderr is the journal stream, but journald's socket is not there: stderr it is. */
static void journal_lines(void)
{
	struct stat st;
	char js[64];

	assert_int_equal(fstat(STDERR_FILENO, &st), 0);
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", js, 1);
	log_init();
	assert_false(log_to_journal()); /* sd_journal_send would drop the lines */
	log_job(LOG_NOTICE, "train-2", "bob", "job %s", "released");
	unsetenv("JOURNAL_STREAM");
	log_init();
	assert_false(log_to_journal());
}

static void test_journal_detection_and_fallback(void **state)
{
	char *out;

	if (access("/run/systemd/journal/socket", F_OK) == 0)
		skip(); /* a real journald would take the entry */
	out = capture(journal_lines);
	assert_int_equal(all_lines_formatted(out), 1);
	assert_non_null(strstr(out, "<5> notice: job released (job train-2, client bob)\n"));
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_lines),
		cmocka_unit_test(test_library_lines),
		cmocka_unit_test(test_journal_detection_and_fallback),
	};

	int rc;

	unsetenv("JOURNAL_STREAM");
	unsetenv("GRPC_VERBOSITY");
	log_init();
	assert_false(log_to_journal());
	grpc_init(); /* sets gRPC's log verbosity (ERROR by default) */
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	grpc_shutdown();
	return rc;
}
