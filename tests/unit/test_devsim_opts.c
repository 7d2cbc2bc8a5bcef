/*
 * test_devsim_opts.c - ocs-devsim's command line (southbound/devsim/devsim_opts.c):
 * defaults, every option reaching its setting, the checks across options,
 * error messages that name the option, and a --help that lists every option
 * with its default. The expected options and defaults are written out here,
 * not read from the table, so that an option dropped from the table or a
 * changed default fails the test.
 */
#include "devsim_opts.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define MAX_ARGS 32

/* Parses the NULL-terminated arguments after "ocs-devsim"; *err_text (caller frees) gets what went
 * to err. */
static int parse(struct devsim_opts *o, char **err_text, ...)
{
	char *argv[MAX_ARGS] = {"ocs-devsim"};
	int argc = 1;
	va_list ap;
	va_start(ap, err_text);
	for (char *a; (a = va_arg(ap, char *));)
		argv[argc++] = a;
	va_end(ap);
	size_t len = 0;
	FILE *err = open_memstream(err_text, &len);
	assert_non_null(err);
	int rc = devsim_opts_parse(o, argc, argv, err);
	fclose(err);
	return rc;
}

#define SSH_MINIMAL "--listen", "127.0.0.1:830", "--user", "u", "--password", "p"

static void test_defaults(void **state)
{
	struct devsim_opts o;
	char *err = NULL;
	assert_int_equal(parse(&o, &err, SSH_MINIMAL, NULL), DEVSIM_OPTS_RUN);
	assert_string_equal(err, "");
	assert_string_equal(o.listen_addr, "127.0.0.1");
	assert_int_equal(o.port, 830);
	assert_int_equal(o.model, DEVSIM_MODEL_SWITCH);
	assert_int_equal(o.ports, 64);
	assert_int_equal(o.switch_ms, 25);
	assert_int_equal(o.switch_us, 25000);
	assert_int_equal(o.count, 1);
	assert_true(o.bidirectional);
	assert_true(o.confirmed_commit);
	assert_int_equal(o.workers, 4);
	assert_string_equal(o.ietf_dir, "/usr/share/yuma/modules/ietf");
	assert_string_equal(o.user, "u");
	assert_string_equal(o.password, "p");
	assert_null(o.authorized_key);
	assert_null(o.hostkey);
	assert_null(o.tls_cert);
	assert_int_equal(o.n_faults, 0);
	devsim_opts_clear(&o);
	free(err);
}

/*
 * A transceiver settles in 200 us and is never bidirectional; its devices
 * serve nodes 0..count-1 of an open line (one node per ToR), K = 2, two
 * bundles.
 */
static void test_transceiver_defaults(void **state)
{
	struct devsim_opts o;
	char *err = NULL;
	assert_int_equal(
		parse(&o, &err, SSH_MINIMAL, "--model", "ocs-transceiver", "--count", "5", NULL),
		DEVSIM_OPTS_RUN);
	assert_int_equal(o.model, DEVSIM_MODEL_TRANSCEIVER);
	assert_int_equal(o.switch_us, 200);
	assert_int_equal(o.switch_ms, 0);
	assert_false(o.bidirectional);
	assert_string_equal(devsim_model_name(o.model), "ocs-transceiver");
	assert_int_equal(o.node_base, 0);
	assert_int_equal(o.ring_tors, 5);
	assert_int_equal(o.ring_nodes_per_tor, 1);
	assert_int_equal(o.ring_k, 2);
	assert_int_equal(o.bundles, 2);
	assert_false(o.ring_closed);
	devsim_opts_clear(&o);
	free(err);
	/* the default line grows with node-base and rounds up to whole ToRs */
	assert_int_equal(parse(&o, &err, SSH_MINIMAL, "--model", "ocs-transceiver", "--count", "5",
			       "--node-base", "6", "--ring-nodes-per-tor", "4", NULL),
			 DEVSIM_OPTS_RUN);
	assert_int_equal(o.ring_tors, 3); /* 11 nodes served: 3 ToRs of 4 */
	devsim_opts_clear(&o);
	free(err);
	/* --switch-ms still works for transceivers, in whole milliseconds */
	assert_int_equal(parse(&o, &err, SSH_MINIMAL, "--model", "ocs-transceiver", "--switch-ms",
			       "3", NULL),
			 DEVSIM_OPTS_RUN);
	assert_int_equal(o.switch_us, 3000);
	devsim_opts_clear(&o);
	free(err);
}

/* Every ring option reaches its setting. */
static void test_transceiver_options(void **state)
{
	struct devsim_opts o;
	char *err = NULL;
	int rc = parse(&o, &err, SSH_MINIMAL, "--model", "ocs-transceiver", "--count", "16",
		       "--node-base", "32", "--ring-tors", "8", "--ring-nodes-per-tor", "8",
		       "--ring-k", "3", "--ring-closed", "--bundles", "4", "--switch-us", "750",
		       "--fault", "3/node-fault", NULL);
	assert_string_equal(err, "");
	assert_int_equal(rc, DEVSIM_OPTS_RUN);
	assert_int_equal(o.node_base, 32);
	assert_int_equal(o.ring_tors, 8);
	assert_int_equal(o.ring_nodes_per_tor, 8);
	assert_int_equal(o.ring_k, 3);
	assert_true(o.ring_closed);
	assert_int_equal(o.bundles, 4);
	assert_int_equal(o.switch_us, 750);
	assert_int_equal(o.switch_ms, 0);
	assert_int_equal(o.n_faults, 1);
	assert_int_equal(o.faults[0].device, 3);
	assert_true(o.faults[0].faults.node_fault);
	devsim_opts_clear(&o);
	free(err);
}

static void test_every_option(void **state)
{
	struct devsim_opts o;
	char *err = NULL;
	int rc = parse(&o, &err, "--listen", "[::1]:2000", "--model", "ocs-switch", "--ports", "8",
		       "--user", "admin", "--password", "pw", "--authorized-key", "/k.pub",
		       "--hostkey", "/hk", "--switch-ms", "0", "--fault", "refuse@commit",
		       "--fault", "2/hang@lock=50,fail-port=3", "--count", "3", "--unidirectional",
		       "--no-confirmed-commit", "--workers=7", "--ietf-dir", "/ietf", NULL);
	assert_string_equal(err, "");
	assert_int_equal(rc, DEVSIM_OPTS_RUN);
	assert_string_equal(o.listen_addr, "[::1]");
	assert_int_equal(o.port, 2000);
	assert_int_equal(o.ports, 8);
	assert_string_equal(o.user, "admin");
	assert_string_equal(o.password, "pw");
	assert_string_equal(o.authorized_key, "/k.pub");
	assert_string_equal(o.hostkey, "/hk");
	assert_int_equal(o.switch_ms, 0);
	assert_int_equal(o.count, 3);
	assert_false(o.bidirectional);
	assert_false(o.confirmed_commit);
	assert_int_equal(o.workers, 7);
	assert_string_equal(o.ietf_dir, "/ietf");
	assert_int_equal(o.n_faults, 2);
	assert_int_equal(o.faults[0].device, -1);
	assert_int_equal(o.faults[0].faults.refuse_mask, 1u << DEVSIM_STEP_COMMIT);
	assert_int_equal(o.faults[1].device, 2);
	assert_int_equal(o.faults[1].faults.hang_ms[DEVSIM_STEP_LOCK], 50);
	assert_int_equal(o.faults[1].faults.n_failed_ports, 1);
	assert_int_equal(o.faults[1].faults.failed_ports[0], 3);
	devsim_opts_clear(&o);
	free(err);
}

static void test_tls(void **state)
{
	struct devsim_opts o;
	char *err = NULL;
	assert_int_equal(parse(&o, &err, "--listen", "0.0.0.0:6513", "--user", "u", "--tls-cert",
			       "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem", NULL),
			 DEVSIM_OPTS_RUN);
	assert_string_equal(o.tls_cert, "c.pem");
	assert_string_equal(o.tls_key, "k.pem");
	assert_string_equal(o.tls_ca, "ca.pem");
	assert_null(o.password);
	devsim_opts_clear(&o);
	free(err);
}

/* Each bad command line is refused with a message that contains `names`. */
static void expect_refused(const char *names, ...)
{
	char *argv[MAX_ARGS] = {"ocs-devsim"};
	int argc = 1;
	va_list ap;
	va_start(ap, names);
	for (char *a; (a = va_arg(ap, char *));)
		argv[argc++] = a;
	va_end(ap);
	char *text = NULL;
	size_t len = 0;
	FILE *err = open_memstream(&text, &len);
	struct devsim_opts o;
	int rc = devsim_opts_parse(&o, argc, argv, err);
	fclose(err);
	if (rc != -EINVAL || !strstr(text, names))
		fail_msg("%s ...: rc %d, message '%s', expected -EINVAL naming '%s'", argv[1], rc,
			 text, names);
	devsim_opts_clear(&o);
	free(text);
}

static void test_errors_name_the_option(void **state)
{
	expect_refused("--ports: expected an integer in 1..4096, got 'x'", SSH_MINIMAL, "--ports",
		       "x", NULL);
	expect_refused("--ports", SSH_MINIMAL, "--ports", "0", NULL);
	expect_refused("--ports", SSH_MINIMAL, "--ports", "4097", NULL);
	expect_refused("--count", SSH_MINIMAL, "--count", "-1", NULL);
	expect_refused("--workers", SSH_MINIMAL, "--workers", "65", NULL);
	expect_refused("--switch-ms", SSH_MINIMAL, "--switch-ms", "600001", NULL);
	expect_refused("--switch-ms", SSH_MINIMAL, "--switch-ms", "99999999999999999999", NULL);
	expect_refused("--model: expected ocs-switch or ocs-transceiver", SSH_MINIMAL, "--model",
		       "router", NULL);
	expect_refused("--listen", "--listen", "127.0.0.1", "--user", "u", "--password", "p", NULL);
	expect_refused("--listen", "--listen", "127.0.0.1:0", "--user", "u", "--password", "p",
		       NULL);
	expect_refused("--listen", "--listen", ":830", "--user", "u", "--password", "p", NULL);
	expect_refused("--fault: fault 'refuse@nothing'", SSH_MINIMAL, "--fault", "refuse@nothing",
		       NULL);
	expect_refused("--fault: expected I/SPEC", SSH_MINIMAL, "--fault", "x/refuse@lock", NULL);
	expect_refused("--ports: needs an argument", SSH_MINIMAL, "--ports", NULL);
	expect_refused("--unidirectional: takes no argument", SSH_MINIMAL, "--unidirectional=1",
		       NULL);
	expect_refused("unknown option '--bogus'", SSH_MINIMAL, "--bogus", "3", NULL);
	expect_refused("unexpected argument 'extra'", SSH_MINIMAL, "extra", NULL);
	expect_refused("--switch-us", SSH_MINIMAL, "--switch-us", "600000001", NULL);
	expect_refused("--ring-k: expected an integer in 1..16", SSH_MINIMAL, "--model",
		       "ocs-transceiver", "--ring-k", "17", NULL);
	expect_refused("--ring-k", SSH_MINIMAL, "--model", "ocs-transceiver", "--ring-k", "0",
		       NULL);
	expect_refused("--bundles", SSH_MINIMAL, "--model", "ocs-transceiver", "--bundles", "65",
		       NULL);
	expect_refused("--ring-tors", SSH_MINIMAL, "--model", "ocs-transceiver", "--ring-tors", "0",
		       NULL);
	expect_refused("--node-base", SSH_MINIMAL, "--model", "ocs-transceiver", "--node-base",
		       "-1", NULL);
	expect_refused("--ring-closed: takes no argument", SSH_MINIMAL, "--ring-closed=yes", NULL);
}

static void test_combinations(void **state)
{
	expect_refused("--listen ADDR:PORT is required", "--user", "u", "--password", "p", NULL);
	expect_refused("--user and --password (or --password-file) and/or --authorized-key",
		       "--listen", "h:1", "--user", "u", NULL);
	expect_refused("--user and --password", "--listen", "h:1", "--password", "p", NULL);
	expect_refused("TLS needs --tls-cert, --tls-key, --tls-ca and --user", "--listen", "h:1",
		       "--user", "u", "--tls-cert", "c", "--tls-key", "k", NULL);
	expect_refused("TLS needs", "--listen", "h:1", "--tls-cert", "c", "--tls-key", "k",
		       "--tls-ca", "a", NULL);
	expect_refused("--count 2 does not fit above port 65535", "--listen", "h:65535", "--user",
		       "u", "--password", "p", "--count", "2", NULL);
	expect_refused("--switch-us: give --switch-ms or --switch-us, not both", SSH_MINIMAL,
		       "--switch-ms", "1", "--switch-us", "100", NULL);
	/* the ring geometry belongs to transceivers */
	expect_refused("--ring-k: only for --model ocs-transceiver", SSH_MINIMAL, "--ring-k", "2",
		       NULL);
	expect_refused("--node-base: only for --model ocs-transceiver", SSH_MINIMAL, "--node-base",
		       "4", NULL);
	expect_refused("--ring-closed: only for --model ocs-transceiver", SSH_MINIMAL,
		       "--ring-closed", NULL);
	expect_refused("--bundles: only for --model ocs-transceiver", SSH_MINIMAL, "--bundles", "2",
		       NULL);
	/* every node served must exist in the domain */
	expect_refused("--ring-tors: the domain has 8 nodes", SSH_MINIMAL, "--model",
		       "ocs-transceiver", "--count", "4", "--node-base", "6", "--ring-tors", "2",
		       "--ring-nodes-per-tor", "4", NULL);
	expect_refused("--ring-k: 4 reaches beyond the domain's 4 nodes", SSH_MINIMAL, "--model",
		       "ocs-transceiver", "--count", "4", "--ring-k", "4", NULL);
	/* key authentication alone is enough */
	struct devsim_opts o;
	char *err = NULL;
	assert_int_equal(parse(&o, &err, "--listen", "h:65535", "--user", "u", "--authorized-key",
			       "k", NULL),
			 DEVSIM_OPTS_RUN);
	devsim_opts_clear(&o);
	free(err);
}

/* --help (and --version) win over missing options, wherever they stand;
 * parsing can run again. */
static void test_help_request(void **state)
{
	struct devsim_opts o;
	char *err = NULL;
	assert_int_equal(parse(&o, &err, "--help", NULL), DEVSIM_OPTS_HELP);
	devsim_opts_clear(&o);
	free(err);
	assert_int_equal(parse(&o, &err, "--ports", "8", "-h", NULL), DEVSIM_OPTS_HELP);
	devsim_opts_clear(&o);
	free(err);
	/* --version too, and it is not --help */
	assert_int_equal(parse(&o, &err, "--ports", "8", "--version", NULL), DEVSIM_OPTS_VERSION);
	devsim_opts_clear(&o);
	free(err);
	assert_int_equal(parse(&o, &err, SSH_MINIMAL, "--count", "2", NULL), DEVSIM_OPTS_RUN);
	assert_int_equal(o.count, 2);
	devsim_opts_clear(&o);
	free(err);
}

/* Every option, with its argument and default, as --help must show them. */
static const struct {
	const char *synopsis;
	const char *dflt;
} expected_help[] = {
	{"--listen ADDR:PORT", "[required]"},
	{"--model MODEL", "[ocs-switch]"},
	{"--ports N", "[64]"},
	{"--user U", "[required]"},
	{"--password P", "[none]"},
	{"--password-file FILE", "[none]"},
	{"--authorized-key FILE", "[none]"},
	{"--hostkey FILE", "[a fresh ECDSA key in /tmp, removed at exit]"},
	{"--tls-cert FILE", "[none: SSH]"},
	{"--tls-key FILE", "[none: SSH]"},
	{"--tls-ca FILE", "[none: SSH]"},
	{"--switch-ms MS", "[25 for ocs-switch; ocs-transceiver: see --switch-us]"},
	{"--switch-us US", "[200 for ocs-transceiver; ocs-switch: see --switch-ms]"},
	{"--node-base N", "[0]"},
	{"--ring-tors N", "[enough for node-base + count nodes]"},
	{"--ring-nodes-per-tor N", "[1]"},
	{"--ring-k K", "[2, or 1 in a domain of 2 nodes or fewer]"},
	{"--ring-closed", "[off: an open line]"},
	{"--bundles N", "[2]"},
	{"--fault [I/]SPEC", "[none]"},
	{"--count N", "[1]"},
	{"--unidirectional", "[off: ocs-switch devices are bidirectional]"},
	{"--no-confirmed-commit", "[off]"},
	{"--workers N", "[4]"},
	{"--ietf-dir DIR", "[/usr/share/yuma/modules/ietf]"},
	{"--help", "[off]"},
	{"--version", "[off]"},
};

static void test_help_lists_every_option(void **state)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	devsim_opts_help(out);
	fclose(out);
	/* one option's entry runs from "\n  --name" to the next; wrapped lines joined */
	size_t n_entries = 0;
	for (const char *p = text; (p = strstr(p, "\n  --")); p++)
		n_entries++;
	assert_int_equal(n_entries, sizeof(expected_help) / sizeof(expected_help[0]));
	for (size_t i = 0; i < n_entries; i++) {
		char start[64];
		snprintf(start, sizeof(start), "\n  %s ", expected_help[i].synopsis);
		const char *entry = strstr(text, start);
		if (!entry) { /* cmocka's fail_msg is not declared noreturn */
			fail_msg("--help has no entry '%s'", expected_help[i].synopsis);
			continue;
		}
		const char *end = strstr(entry + 1, "\n  --");
		size_t entry_len = end ? (size_t)(end - entry) : strlen(entry);
		char joined[512];
		size_t j = 0;
		for (size_t k = 0; k < entry_len && j + 1 < sizeof(joined); k++) {
			if (entry[k] == '\n' || (entry[k] == ' ' && j && joined[j - 1] == ' '))
				continue;
			joined[j++] = entry[k];
		}
		joined[j] = '\0';
		if (!strstr(joined, expected_help[i].dflt))
			fail_msg("--help entry '%s' lacks its default %s", joined,
				 expected_help[i].dflt);
	}
	for (const char *line = text; *line; line += strcspn(line, "\n") + 1)
		if (strcspn(line, "\n") > 80)
			fail_msg("--help line wider than 80 columns: %.*s",
				 (int)strcspn(line, "\n"), line);
	free(text);
}

/* Writes content (len bytes) to a new file of dir with the given mode; its path in path. */
static void write_file(const char *dir, const char *name, const char *content, size_t len,
		       mode_t mode, char *path, size_t path_len)
{
	snprintf(path, path_len, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(content, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

/* Parses SSH options with --password-file path; the password read, or NULL when refused. */
static char *password_from(const char *path, char **err)
{
	struct devsim_opts o;
	int rc = parse(&o, err, "--listen", "h:1", "--user", "u", "--password-file", path, NULL);
	char *pw = rc == DEVSIM_OPTS_RUN ? strdup(o.password) : NULL;
	if (rc == DEVSIM_OPTS_RUN)
		assert_ptr_equal(o.password, o.password_secret);
	else
		assert_int_equal(rc, -EINVAL);
	devsim_opts_clear(&o);
	assert_null(o.password_secret);
	return pw;
}

/*
 * --password-file: the first line without its line end; a missing, empty or
 * unreadable file refused naming the option and the file; a file every user
 * may read accepted with a warning; not together with --password.
 */
static void test_password_file(void **state)
{
	char dir[] = "/tmp/devsim-opts-XXXXXX", path[300], *err = NULL, *pw;
	assert_non_null(mkdtemp(dir));
	static const struct {
		const char *name, *content, *password;
	} good[] = {
		{"plain", "s3cret\n", "s3cret"},
		{"crlf", "s3cret\r\n", "s3cret"},
		{"no-newline", "s3cret", "s3cret"},
		{"two-lines", "first line\nsecond\n", "first line"},
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		write_file(dir, good[i].name, good[i].content, strlen(good[i].content), 0600, path,
			   sizeof(path));
		pw = password_from(path, &err);
		if (!pw || strcmp(pw, good[i].password) || *err)
			fail_msg("%s: password '%s', message '%s'", good[i].name,
				 pw ? pw : "(null)", err);
		free(pw);
		free(err);
	}
	/* readable by every user: accepted, with a warning naming the file and its mode */
	write_file(dir, "shared", "s3cret\n", 7, 0644, path, sizeof(path));
	pw = password_from(path, &err);
	assert_string_equal(pw, "s3cret");
	assert_non_null(strstr(err, "warning: --password-file"));
	assert_non_null(strstr(err, "readable by every user (mode 0644)"));
	assert_non_null(strstr(err, path));
	free(pw);
	free(err);
	/* refused, naming the option and the reason */
	static const struct {
		const char *name, *content;
		size_t len;
		const char *why;
	} bad[] = {
		{"empty", "", 0, "the first line is empty"},
		{"empty-first-line", "\nsecond\n", 8, "the first line is empty"},
		{"newline-only", "\r\n", 2, "the first line is empty"},
		{"nul", "ab\0cd\n", 6, "NUL byte"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(dir, bad[i].name, bad[i].content, bad[i].len, 0600, path, sizeof(path));
		assert_null(password_from(path, &err));
		if (!strstr(err, "--password-file: ") || !strstr(err, path) ||
		    !strstr(err, bad[i].why))
			fail_msg("%s: message '%s', expected '%s'", bad[i].name, err, bad[i].why);
		free(err);
	}
	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_null(password_from(path, &err));
	assert_non_null(strstr(err, "--password-file: cannot read"));
	assert_non_null(strstr(err, "No such file or directory"));
	free(err);
	assert_null(password_from(dir, &err)); /* a directory */
	assert_non_null(strstr(err, "--password-file: cannot read"));
	free(err);
	snprintf(path, sizeof(path), "%s/plain", dir);
	expect_refused("--password-file: give --password or --password-file, not both", "--listen",
		       "h:1", "--user", "u", "--password", "p", "--password-file", path, NULL);
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, good[i].name);
		unlink(path);
	}
	static const char *const others[] = {"shared", "empty", "empty-first-line", "newline-only",
					     "nul"};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, others[i]);
		unlink(path);
	}
	assert_int_equal(rmdir(dir), 0);
}

static void test_clear_accepts_null(void **state)
{
	devsim_opts_clear(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_transceiver_defaults),
		cmocka_unit_test(test_transceiver_options),
		cmocka_unit_test(test_every_option),
		cmocka_unit_test(test_tls),
		cmocka_unit_test(test_errors_name_the_option),
		cmocka_unit_test(test_combinations),
		cmocka_unit_test(test_help_request),
		cmocka_unit_test(test_help_lists_every_option),
		cmocka_unit_test(test_password_file),
		cmocka_unit_test(test_clear_accepts_null),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
