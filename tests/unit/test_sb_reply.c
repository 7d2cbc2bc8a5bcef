/*
 * test_sb_reply.c - the NETCONF reply scanner of southbound/sb_reply.c:
 * <ok/>, <rpc-error> strings as the daemon shows them (tag, message, path;
 * entities and CDATA decoded; several errors), message-id checks,
 * notifications told apart, cross-connects and transceiver bundles read
 * from <data> whatever the prefixes, blanks and comments, refusals of what
 * it cannot read safely, and a property test: random cross-connect sets
 * printed in random styles read back as the same sorted set.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <errno.h>

#include "sb_reply.h"

#define BASE "urn:ietf:params:xml:ns:netconf:base:1.0"

static int scan(const char *s, const char *id, struct sb_reply *r)
{
	return sb_reply_scan(s, strlen(s), id, r);
}

static void test_ok_and_message_id(void **state)
{
	(void)state;
	struct sb_reply r;
	assert_int_equal(
		scan("<?xml version=\"1.0\"?>\n<rpc-reply message-id=\"ocsd-7\" xmlns=\"" BASE
		     "\"><ok/></rpc-reply>\n",
		     "ocsd-7", &r),
		0);
	assert_int_equal(r.kind, SB_REPLY_OK);
	/* prefixed, single quotes, other attributes first, blanks around */
	assert_int_equal(scan("<nc:rpc-reply xmlns:nc='" BASE "' a='x' message-id='ocsd-8' >"
			      "\n  <nc:ok />\n</nc:rpc-reply>",
			      "ocsd-8", &r),
			 0);
	assert_int_equal(r.kind, SB_REPLY_OK);
	/* another message-id is refused, and says which */
	assert_int_equal(scan("<rpc-reply message-id=\"12\"><ok/></rpc-reply>", "ocsd-3", &r),
			 -EPROTO);
	assert_non_null(strstr(r.error, "\"12\""));
	assert_int_equal(scan("<rpc-reply><ok/></rpc-reply>", "ocsd-3", &r), -EPROTO);
	assert_int_equal(scan("<rpc-reply message-id=\"ocsd-31\"><ok/></rpc-reply>", "ocsd-3", &r),
			 -EPROTO);
	/* a reply with nothing in it */
	assert_int_equal(scan("<rpc-reply message-id=\"1\"/>", "1", &r), 0);
	assert_int_equal(r.kind, SB_REPLY_EMPTY);
}

static void test_rpc_errors(void **state)
{
	(void)state;
	struct sb_reply r;
	const char *s =
		"<rpc-reply message-id=\"ocsd-1\" xmlns=\"" BASE "\">"
		"<rpc-error><error-type>protocol</error-type><error-tag>in-use</error-tag>"
		"<error-severity>error</error-severity>"
		"<error-message xml:lang=\"en\">lock held by session 5 &amp; &lt;x&gt; "
		"&#233;&#x41;</error-message>"
		"<error-info><session-id>5</session-id></error-info></rpc-error>"
		"<rpc-error><error-tag>invalid-value</error-tag>"
		"<error-path>\n  /ocs:cross-connects/ocs:connection[ocs:input='3']/ocs:output\n"
		"</error-path><error-message><![CDATA[output <70000> out of range]]>"
		"</error-message></rpc-error></rpc-reply>";
	assert_int_equal(scan(s, "ocsd-1", &r), 0);
	assert_int_equal(r.kind, SB_REPLY_ERROR);
	assert_string_equal(r.error,
			    "in-use: lock held by session 5 & <x> \xc3\xa9"
			    "A; invalid-value: output <70000> out of range at "
			    "/ocs:cross-connects/ocs:connection[ocs:input='3']/ocs:output");
	/* lock-denied's holder, from <error-info> (recovery kills that session) */
	assert_int_equal(r.session_id, 5);
	assert_int_equal(scan("<rpc-reply><rpc-error><error-tag>lock-denied</error-tag>"
			      "<error-info><bad-element>x</bad-element><session-id> 4294967295 "
			      "</session-id></error-info></rpc-error></rpc-reply>",
			      NULL, &r),
			 0);
	assert_int_equal(r.session_id, 4294967295u);
	assert_int_equal(scan("<rpc-reply><rpc-error><error-tag>lock-denied</error-tag>"
			      "<error-info><session-id>4294967296</session-id></error-info>"
			      "</rpc-error></rpc-reply>",
			      NULL, &r),
			 0);
	assert_int_equal(r.session_id, 0); /* out of range: none */
	/* an error wins over <ok/> */
	assert_int_equal(scan("<rpc-reply><ok/><rpc-error><error-tag>x</error-tag></rpc-error>"
			      "</rpc-reply>",
			      NULL, &r),
			 0);
	assert_int_equal(r.kind, SB_REPLY_ERROR);
	assert_string_equal(r.error, "x: ");
	/* a long message is cut, never overflows */
	char big[4000];
	int n = snprintf(big, sizeof(big), "<rpc-reply>");
	for (int i = 0; i < 20; i++)
		n += snprintf(big + n, sizeof(big) - (size_t)n,
			      "<rpc-error><error-tag>operation-failed</error-tag><error-message>"
			      "%0100d</error-message></rpc-error>",
			      i);
	snprintf(big + n, sizeof(big) - (size_t)n, "</rpc-reply>");
	assert_int_equal(scan(big, NULL, &r), 0);
	assert_int_equal(r.kind, SB_REPLY_ERROR);
	assert_true(strlen(r.error) < sizeof(r.error));
	assert_non_null(strstr(r.error, "operation-failed: 000"));
}

static void test_notification_and_refusals(void **state)
{
	(void)state;
	struct sb_reply r;
	assert_int_equal(scan("<notification xmlns=\"urn:ietf:params:xml:ns:netconf:"
			      "notification:1.0\"><eventTime>2026-01-01T00:00:00Z</eventTime>"
			      "</notification>",
			      "ocsd-1", &r),
			 0);
	assert_int_equal(r.kind, SB_REPLY_NOTIFICATION);
	const char *bad[] = {
		"",
		"   ",
		"<hello/>",
		"<rpc-reply><ok/>",
		"<rpc-reply><ok></rpc-reply>",
		"<rpc-reply><data><a></b></data></rpc-reply>",
		"<rpc-reply><ok/></rpc-reply><rpc-reply/>",
		"<!DOCTYPE x [<!ENTITY e \"boom\">]><rpc-reply><ok/></rpc-reply>",
		"<rpc-reply><rpc-error><error-tag>&e;</error-tag></rpc-error></rpc-reply>",
		"<rpc-reply><rpc-error><error-tag>&#0;</error-tag></rpc-error></rpc-reply>",
		"<rpc-reply><rpc-error><error-tag>&#x110000;</error-tag></rpc-error></rpc-reply>",
		"<rpc-reply a=\"<\"><ok/></rpc-reply>",
		"<rpc-reply><!-- never closed <ok/></rpc-reply>",
		"<rpc-reply><data><![CDATA[ never closed </data></rpc-reply>",
		"<rpc-reply message-id=\"1></rpc-reply>",
		"</rpc-reply>",
		"<>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (scan(bad[i], NULL, &r) != -EPROTO)
			fail_msg("accepted: %s", bad[i]);
		assert_true(r.error[0] != '\0');
	}
	/* an embedded NUL is only a byte: the length bounds the scan */
	static const char nul[] = "<rpc-reply><ok/>\0</rpc-reply>";
	assert_int_equal(sb_reply_scan(nul, sizeof(nul) - 1, NULL, &r), -EPROTO);
	assert_int_equal(sb_reply_scan("<rpc-reply><ok/></rpc-reply>", 16, NULL, &r), -EPROTO);
}

static const char *XCS_REPLY =
	"<rpc-reply message-id=\"ocsd-2\" xmlns=\"" BASE "\"><data>\n"
	"<!-- state -->"
	"<other xmlns=\"urn:x\"><connection><input>9</input><output>9</output></connection></other>"
	"<ocs:cross-connects xmlns:ocs=\"urn:ocsd:yang:ocs-switch\">\n"
	"  <ocs:connection><ocs:input> 7 </ocs:input><ocs:output>3</ocs:output>"
	"<ocs:status>pending</ocs:status><ocs:reason>switching</ocs:reason></ocs:connection>\n"
	"  <ocs:connection><ocs:input>2</ocs:input><ocs:output>65535</ocs:output>"
	"<ocs:status>connected</ocs:status></ocs:connection>\n"
	"  <ocs:connection><ocs:input>5</ocs:input></ocs:connection>\n"
	"  <ocs:connection><ocs:output>4</ocs:output><ocs:input>0</ocs:input>"
	"<ocs:status>failed</ocs:status></ocs:connection>\n"
	"  <ocs:connection><ocs:input>1</ocs:input><ocs:output>6</ocs:output>"
	"<ocs:status>invalid</ocs:status></ocs:connection>\n"
	"  <ocs:connection><ocs:input>4</ocs:input><ocs:output>8</ocs:output>"
	"<ocs:status>weird</ocs:status></ocs:connection>\n"
	"</ocs:cross-connects></data></rpc-reply>";

static void test_xcs(void **state)
{
	(void)state;
	struct sb_reply r;
	assert_int_equal(scan(XCS_REPLY, "ocsd-2", &r), 0);
	assert_int_equal(r.kind, SB_REPLY_DATA);
	struct sb_xc_state *x = NULL;
	size_t n = 0;
	assert_int_equal(sb_reply_xcs(r.data, r.data_len, &x, &n), 0);
	const struct sb_xc_state want[] = {
		{0, 4, SB_XC_STATUS_FAILED},	    {1, 6, SB_XC_STATUS_INVALID},
		{2, 65535, SB_XC_STATUS_CONNECTED}, {4, 8, SB_XC_STATUS_UNKNOWN},
		{7, 3, SB_XC_STATUS_PENDING},
	};
	assert_int_equal(n, 5); /* input 5 without output skipped, <other> ignored */
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(x[i].in, want[i].in);
		assert_int_equal(x[i].out, want[i].out);
		assert_int_equal(x[i].status, want[i].status);
	}
	free(x);
	/* empty data, and data without cross-connects */
	assert_int_equal(scan("<rpc-reply><data/></rpc-reply>", NULL, &r), 0);
	assert_int_equal(r.kind, SB_REPLY_DATA);
	assert_int_equal(sb_reply_xcs(r.data, r.data_len, &x, &n), 0);
	assert_int_equal(n, 0);
	assert_null(x);
	/* a value that is not a port number is refused, not guessed */
	const char *bad[] = {
		"<cross-connects><connection><input>70000</input><output>1</output></connection>"
		"</cross-connects>",
		"<cross-connects><connection><input>-1</input><output>1</output></connection>"
		"</cross-connects>",
		"<cross-connects><connection><input>1x</input><output>1</output></connection>"
		"</cross-connects>",
		"<cross-connects><connection><input></input><output>1</output></connection>"
		"</cross-connects>",
		"<cross-connects><connection><input>1</input><output>1</output>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(sb_reply_xcs(bad[i], strlen(bad[i]), &x, &n), -EPROTO);
		assert_null(x);
		assert_int_equal(n, 0);
	}
}

static void test_bundles(void **state)
{
	(void)state;
	const char *d =
		"<transceivers xmlns=\"urn:ocsd:yang:ocs-transceiver\">"
		"<node><id>4</id><faulty>false</faulty><bundle><id>0</id><path>loopback</path>"
		"</bundle></node>"
		"<node><id>3</id><faulty>true</faulty>"
		"<bundle><id>1</id><path>external</path><external><distance>2</distance>"
		"<direction>up</direction></external><peer-node>5</peer-node>"
		"<path-status><path>loopback</path><status>active</status></path-status>"
		"<path-status><path>external</path><distance>1</distance><direction>up</direction>"
		"<status>failed</status></path-status>"
		"<path-status><path>external</path><distance>2</distance><direction>up</direction>"
		"<status>pending</status></path-status></bundle>"
		"<bundle><id>0</id><path>external</path><external><distance>1</distance>"
		"<direction>down</direction></external><peer-node>2</peer-node>"
		"<path-status><path>external</path><distance>1</distance><direction>down</"
		"direction>"
		"<status>active</status></path-status></bundle>"
		"<bundle><id>2</id><path>loopback</path>"
		"<path-status><path>loopback</path><status>active</status></path-status></bundle>"
		"</node></transceivers>";
	struct sb_bundle_state *b = NULL;
	size_t n = 0;
	bool faulty = false;
	assert_int_equal(sb_reply_bundles(d, strlen(d), 3, &b, &n, &faulty), 0);
	assert_true(faulty);
	assert_int_equal(n, 3);
	assert_int_equal(b[0].set.bundle, 0);
	assert_int_equal(b[0].set.path, 1);
	assert_int_equal(b[0].set.distance, 1);
	assert_int_equal(b[0].set.dir, 1);
	assert_int_equal(b[0].peer_node, 2);
	assert_int_equal(b[0].status, SB_PATH_ACTIVE);
	assert_int_equal(b[1].set.bundle, 1);
	assert_int_equal(b[1].set.distance, 2);
	assert_int_equal(b[1].set.dir, 0);
	assert_int_equal(b[1].peer_node, 5);
	assert_int_equal(b[1].status, SB_PATH_PENDING); /* the selected path's entry */
	assert_int_equal(b[2].set.path, 0);
	assert_int_equal(b[2].peer_node, -1);
	assert_int_equal(b[2].status, SB_PATH_ACTIVE);
	free(b);
	/* node 4: one loopback bundle from configuration; node 9: none */
	assert_int_equal(sb_reply_bundles(d, strlen(d), 4, &b, &n, &faulty), 0);
	assert_false(faulty);
	assert_int_equal(n, 1);
	assert_int_equal(b[0].status, SB_PATH_UNKNOWN);
	free(b);
	/* node 9: none; the bundles of the nodes read and dropped leave no buffer (fuzz_sb_reply)
	 */
	b = (struct sb_bundle_state *)d;
	assert_int_equal(sb_reply_bundles(d, strlen(d), 9, &b, &n, NULL), 0);
	assert_int_equal(n, 0);
	assert_null(b);
	const char *bad = "<transceivers><node><id>3</id><bundle><id>256</id></bundle></node>"
			  "</transceivers>";
	assert_int_equal(sb_reply_bundles(bad, strlen(bad), 3, &b, &n, NULL), -EPROTO);
	assert_null(b);
}

static int cmp_state(const void *a, const void *b)
{
	const struct sb_xc_state *x = a, *y = b;
	return x->in != y->in ? x->in - y->in : x->out - y->out;
}

static void test_property_xcs(void **state)
{
	(void)state;
	static const char *status_name[] = {NULL, "connected", "pending", "failed", "invalid"};
	static char xml[1 << 16];
	unsigned seed = 11;
	for (int round = 0; round < 500; round++) {
		struct sb_xc_state want[64];
		size_t n = (size_t)rand_r(&seed) % 64;
		const char *pfx = rand_r(&seed) % 2 ? "o:" : "";
		const char *ws = rand_r(&seed) % 2 ? "\n  " : "";
		size_t len =
			(size_t)snprintf(xml, sizeof(xml),
					 "<rpc-reply message-id=\"r%d\"><data>%s<%scross-connects "
					 "xmlns%s%s=\"urn:ocsd:yang:ocs-switch\">",
					 round, ws, pfx, *pfx ? ":" : "", *pfx ? "o" : "");
		for (size_t i = 0; i < n; i++) {
			/* distinct inputs, as the YANG key demands */
			want[i].in = (uint16_t)(i * 97 + (size_t)round % 97);
			want[i].out = (uint16_t)(rand_r(&seed) % 65536);
			want[i].status = (enum sb_xc_status)(rand_r(&seed) % 5);
			char st[64] = "";
			if (want[i].status)
				snprintf(st, sizeof(st), "<%sstatus>%s</%sstatus>", pfx,
					 status_name[want[i].status], pfx);
			bool out_first = rand_r(&seed) % 2;
			char in_s[64], out_s[64];
			snprintf(in_s, sizeof(in_s), "<%sinput>%u</%sinput>", pfx, want[i].in, pfx);
			snprintf(out_s, sizeof(out_s), "<%soutput>%s%u%s</%soutput>", pfx, ws,
				 want[i].out, ws, pfx);
			len += (size_t)snprintf(xml + len, sizeof(xml) - len,
						"%s<%sconnection>%s%s%s%s<!--c--></%sconnection>",
						ws, pfx, out_first ? out_s : in_s, st,
						out_first ? in_s : out_s, ws, pfx);
		}
		len += (size_t)snprintf(xml + len, sizeof(xml) - len,
					"</%scross-connects></data></rpc-reply>", pfx);
		char id[16];
		snprintf(id, sizeof(id), "r%d", round);
		struct sb_reply r;
		assert_int_equal(sb_reply_scan(xml, len, id, &r), 0);
		assert_int_equal(r.kind, SB_REPLY_DATA);
		struct sb_xc_state *got = NULL;
		size_t n_got = 0;
		assert_int_equal(sb_reply_xcs(r.data, r.data_len, &got, &n_got), 0);
		qsort(want, n, sizeof(want[0]), cmp_state);
		assert_int_equal(n_got, n);
		for (size_t i = 0; i < n; i++) {
			assert_int_equal(got[i].in, want[i].in);
			assert_int_equal(got[i].out, want[i].out);
			assert_int_equal(got[i].status, want[i].status);
		}
		free(got);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ok_and_message_id),
		cmocka_unit_test(test_rpc_errors),
		cmocka_unit_test(test_notification_and_refusals),
		cmocka_unit_test(test_xcs),
		cmocka_unit_test(test_bundles),
		cmocka_unit_test(test_property_xcs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
