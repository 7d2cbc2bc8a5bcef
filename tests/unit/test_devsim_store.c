/*
 * test_devsim_store.c - unit tests of ocs-devsim's datastore engine
 * (southbound/devsim/devsim_store.h: edit-config operations, subtree filters) and
 * of its fault-spec parser (southbound/devsim/devsim_fault.h), on libyang trees
 * of the ocs-switch module without any network.
 */
#include "devsim_fault.h"
#include "devsim_store.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

extern const char sb_yang_ocs_switch[];

static struct ly_ctx *ctx;

static int setup(void **state)
{
	if (ly_ctx_new("/usr/share/yuma/modules/ietf", 0, &ctx))
		return -1;
	const char *f[] = {"*", NULL};
	if (!ly_ctx_load_module(ctx, "ietf-netconf", "2011-06-01", f) ||
	    lys_parse_mem(ctx, sb_yang_ocs_switch, LYS_IN_YANG, NULL))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	ly_ctx_destroy(ctx);
	return 0;
}

#define XC_OPEN                                                                                    \
	"<cross-connects xmlns=\"urn:ocsd:yang:ocs-switch\" "                                      \
	"xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\">"

static struct lyd_node *parse(const char *xml, uint32_t extra)
{
	struct lyd_node *t = NULL;
	assert_int_equal(lyd_parse_data_mem(ctx, xml, LYD_XML, LYD_PARSE_ONLY | extra, 0, &t), 0);
	return t;
}

/* Applies an edit and returns the result as "in>out,in>out" (sorted by libyang). */
static enum ds_error edit(struct lyd_node **tree, const char *body, enum ds_op dflt, char *out,
			  size_t len)
{
	char xml[1024], msg[256], path[256];
	snprintf(xml, sizeof(xml), XC_OPEN "%s</cross-connects>", body);
	struct lyd_node *e = parse(xml, LYD_PARSE_STRICT);
	enum ds_error r = ds_apply_edit(tree, e, dflt, msg, sizeof(msg), path, sizeof(path));
	lyd_free_all(e);
	out[0] = '\0';
	struct ly_set *set = NULL;
	if (*tree && !lyd_find_xpath(*tree, "/ocs-switch:cross-connects/connection", &set)) {
		for (uint32_t i = 0; i < set->count; i++) {
			struct lyd_node *in = NULL, *o = NULL;
			lyd_find_path(set->dnodes[i], "input", 0, &in);
			lyd_find_path(set->dnodes[i], "output", 0, &o);
			size_t l = strlen(out);
			snprintf(out + l, len - l, "%s%s>%s", l ? "," : "", lyd_get_value(in),
				 o ? lyd_get_value(o) : "?");
		}
		ly_set_free(set, NULL);
	}
	return r;
}

#define XC(i, o)    "<connection><input>" #i "</input><output>" #o "</output></connection>"
#define XCOP(op, i) "<connection nc:operation=\"" op "\"><input>" #i "</input></connection>"

static void test_edit_operations(void **state)
{
	struct lyd_node *tree = NULL;
	char got[256];
	assert_int_equal(edit(&tree, XC(0, 1) XC(1, 0), DS_OP_MERGE, got, sizeof(got)), DS_ERR_OK);
	assert_string_equal(got, "0>1,1>0");
	/* merge changes a leaf in place (no second <output>) */
	assert_int_equal(edit(&tree, XC(0, 2), DS_OP_MERGE, got, sizeof(got)), DS_ERR_OK);
	assert_string_equal(got, "0>2,1>0");
	/* a merge of the value a leaf already has is accepted and changes nothing
	 * (it was refused as "invalid value": found by fuzz_devsim_edit) */
	assert_int_equal(edit(&tree, XC(0, 2) XC(1, 0), DS_OP_MERGE, got, sizeof(got)), DS_ERR_OK);
	assert_string_equal(got, "0>2,1>0");
	/* create on an existing entry: data-exists, and the caller keeps its copy */
	assert_int_equal(edit(&tree,
			      "<connection nc:operation=\"create\"><input>1</input>"
			      "<output>3</output></connection>",
			      DS_OP_MERGE, got, sizeof(got)),
			 DS_ERR_DATA_EXISTS);
	/* delete of a missing entry: data-missing; remove of a missing one: fine */
	assert_int_equal(edit(&tree, XCOP("delete", 7), DS_OP_MERGE, got, sizeof(got)),
			 DS_ERR_DATA_MISSING);
	assert_int_equal(edit(&tree, XCOP("remove", 7), DS_OP_MERGE, got, sizeof(got)), DS_ERR_OK);
	assert_string_equal(got, "0>2,1>0");
	/* removal and addition in one edit */
	assert_int_equal(edit(&tree, XCOP("remove", 1) XC(2, 0), DS_OP_MERGE, got, sizeof(got)),
			 DS_ERR_OK);
	assert_string_equal(got, "0>2,2>0");
	/* replace on the container swaps the whole list */
	char xml[512];
	snprintf(
		xml, sizeof(xml),
		"<cross-connects xmlns=\"urn:ocsd:yang:ocs-switch\" "
		"xmlns:nc=\"urn:ietf:params:xml:ns:netconf:base:1.0\" nc:operation=\"replace\">" XC(
			5, 6) XC(6, 5) "</cross-connects>");
	struct lyd_node *e = parse(xml, LYD_PARSE_STRICT);
	char msg[128], path[128];
	assert_int_equal(ds_apply_edit(&tree, e, DS_OP_MERGE, msg, sizeof(msg), path, sizeof(path)),
			 DS_ERR_OK);
	lyd_free_all(e);
	assert_int_equal(edit(&tree, "", DS_OP_MERGE, got, sizeof(got)), DS_ERR_OK);
	assert_string_equal(got, "5>6,6>5");
	/* default-operation none: only explicit operations act */
	assert_int_equal(edit(&tree, XC(5, 9) XCOP("delete", 6), DS_OP_NONE, got, sizeof(got)),
			 DS_ERR_OK);
	assert_string_equal(got, "5>6");
	lyd_free_all(tree);
	/* an unknown operation does not even parse (the annotation is an enumeration) */
	struct lyd_node *bad = NULL;
	assert_int_not_equal(lyd_parse_data_mem(ctx, XC_OPEN XCOP("explode", 5) "</cross-connects>",
						LYD_XML, LYD_PARSE_ONLY | LYD_PARSE_STRICT, 0,
						&bad),
			     LY_SUCCESS);
	lyd_free_all(bad);
}

static void test_subtree_filter(void **state)
{
	struct lyd_node *data = parse(XC_OPEN XC(0, 1) XC(1, 0) XC(2, 3) "</cross-connects>", 0);
	struct lyd_node *f = parse("<cross-connects xmlns=\"urn:ocsd:yang:ocs-switch\"><connection>"
				   "<input>1</input></connection></cross-connects>",
				   LYD_PARSE_OPAQ);
	struct lyd_node *out = NULL;
	assert_int_equal(ds_subtree_filter(ctx, data, f, &out), 0);
	struct ly_set *set = NULL;
	assert_int_equal(lyd_find_xpath(out, "/ocs-switch:cross-connects/connection", &set), 0);
	assert_int_equal(set->count, 1);
	ly_set_free(set, NULL);
	lyd_free_all(out);
	lyd_free_all(f);
	/* a selection node: outputs only (the keys come along) */
	f = parse("<cross-connects xmlns=\"urn:ocsd:yang:ocs-switch\"><connection><output/>"
		  "</connection></cross-connects>",
		  LYD_PARSE_OPAQ);
	assert_int_equal(ds_subtree_filter(ctx, data, f, &out), 0);
	assert_int_equal(lyd_find_xpath(out, "/ocs-switch:cross-connects/connection/output", &set),
			 0);
	assert_int_equal(set->count, 3);
	ly_set_free(set, NULL);
	lyd_free_all(out);
	lyd_free_all(f);
	/* no filter: everything */
	assert_int_equal(ds_subtree_filter(ctx, data, NULL, &out), 0);
	assert_int_equal(lyd_find_xpath(out, "/ocs-switch:cross-connects/connection", &set), 0);
	assert_int_equal(set->count, 3);
	ly_set_free(set, NULL);
	lyd_free_all(out);
	lyd_free_all(data);
}

static void test_fault_parser(void **state)
{
	struct devsim_faults f;
	char err[256];
	assert_int_equal(devsim_faults_parse("refuse@commit,drop@lock,hang@get=250,fail-port=3", &f,
					     err, sizeof(err)),
			 0);
	assert_true(f.refuse_mask & (1u << DEVSIM_STEP_COMMIT));
	assert_true(f.drop_mask & (1u << DEVSIM_STEP_LOCK));
	assert_int_equal(f.hang_ms[DEVSIM_STEP_GET], 250);
	assert_int_equal(f.hang_ms[DEVSIM_STEP_SCHEMA], 0);
	assert_int_equal(f.n_failed_ports, 1);
	assert_int_equal(f.failed_ports[0], 3);
	assert_int_equal(f.sticky_mask, 0);
	assert_int_equal(devsim_faults_parse("hang@schema=40", &f, err, sizeof(err)), 0);
	assert_int_equal(f.hang_ms[DEVSIM_STEP_SCHEMA], 40);
	assert_int_equal(f.hang_ms[DEVSIM_STEP_GET], 0);
	assert_int_equal(devsim_faults_parse("refuse@confirm+,hang@edit=10+", &f, err, sizeof(err)),
			 0);
	assert_true(f.sticky_mask & (1u << DEVSIM_STEP_CONFIRM));
	assert_int_equal(f.hang_ms[DEVSIM_STEP_EDIT], 10);
	assert_int_equal(devsim_faults_parse("", &f, err, sizeof(err)), 0);
	assert_int_equal(f.refuse_mask | f.drop_mask | f.noeffect_mask, 0);
	/* errors name the knob and say what is expected */
	assert_int_equal(devsim_faults_parse("refuse@launch", &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "refuse@launch"));
	assert_non_null(strstr(err, "unknown step"));
	assert_int_equal(devsim_faults_parse("hang@get=soon", &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "hang time"));
	assert_int_equal(devsim_faults_parse("noeffect@lock", &f, err, sizeof(err)), -EINVAL);
	assert_int_equal(devsim_faults_parse("fail-port=99999", &f, err, sizeof(err)), -EINVAL);
	/* refuse-port: a state of its own, apart from fail-port, several ports */
	assert_int_equal(devsim_faults_parse("refuse-port=3,fail-port=1,refuse-port=0", &f, err,
					     sizeof(err)),
			 0);
	assert_int_equal(f.n_refused_ports, 2);
	assert_int_equal(f.refused_ports[0], 3);
	assert_int_equal(f.refused_ports[1], 0);
	assert_int_equal(f.n_failed_ports, 1);
	assert_int_equal(f.failed_ports[0], 1);
	assert_int_equal(f.refuse_mask | f.sticky_mask, 0);
	assert_int_equal(devsim_faults_parse("refuse-port=4096", &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "refuse-port=4096"));
	assert_int_equal(devsim_faults_parse("refuse-port=", &f, err, sizeof(err)), -EINVAL);
	char many[512] = "";
	for (int i = 0; i <= DEVSIM_MAX_FAILED_PORTS; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%srefuse-port=%d",
			 i ? "," : "", i);
	assert_int_equal(devsim_faults_parse(many, &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "at most"));
	assert_int_equal(devsim_faults_parse("explode", &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "node-fault"));
}

/* The reply faults: garble, trickle (with its delay) and endless, one-shot or sticky. */
static void test_fault_parser_reply(void **state)
{
	(void)state;
	struct devsim_faults f;
	char err[256];
	assert_int_equal(devsim_faults_parse("garble@commit,trickle@get=250,endless@lock", &f, err,
					     sizeof(err)),
			 0);
	assert_int_equal(f.garble_mask, 1u << DEVSIM_STEP_COMMIT);
	assert_int_equal(f.endless_mask, 1u << DEVSIM_STEP_LOCK);
	assert_int_equal(f.trickle_ms[DEVSIM_STEP_GET], 250);
	assert_int_equal(f.trickle_ms[DEVSIM_STEP_COMMIT], 0);
	assert_int_equal(f.hang_ms[DEVSIM_STEP_GET], 0);
	assert_int_equal(f.refuse_mask | f.drop_mask | f.sticky_mask, 0);
	assert_int_equal(devsim_faults_parse("garble@edit+,trickle@confirm=5+,endless@validate+",
					     &f, err, sizeof(err)),
			 0);
	assert_int_equal(f.sticky_mask, (1u << DEVSIM_STEP_EDIT) | (1u << DEVSIM_STEP_CONFIRM) |
						(1u << DEVSIM_STEP_VALIDATE));
	assert_int_equal(f.garble_mask, 1u << DEVSIM_STEP_EDIT);
	assert_int_equal(f.trickle_ms[DEVSIM_STEP_CONFIRM], 5);
	assert_int_equal(f.endless_mask, 1u << DEVSIM_STEP_VALIDATE);
	/* the empty spec clears them */
	assert_int_equal(devsim_faults_parse("", &f, err, sizeof(err)), 0);
	assert_int_equal(f.garble_mask | f.endless_mask | (uint32_t)f.trickle_ms[DEVSIM_STEP_GET],
			 0);
	/* trickle needs a delay of 1..60000 ms; garble and endless take none */
	assert_int_equal(devsim_faults_parse("trickle@get", &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "trickle@get"));
	assert_int_equal(devsim_faults_parse("trickle@get=0", &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "trickle delay"));
	assert_int_equal(devsim_faults_parse("trickle@get=60001", &f, err, sizeof(err)), -EINVAL);
	assert_int_equal(devsim_faults_parse("trickle@get=slow", &f, err, sizeof(err)), -EINVAL);
	assert_int_equal(devsim_faults_parse("garble@commit=5", &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "garble@STEP"));
	assert_int_equal(devsim_faults_parse("endless@commit=1", &f, err, sizeof(err)), -EINVAL);
	assert_int_equal(devsim_faults_parse("endless@forever", &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown step"));
	assert_int_equal(devsim_faults_parse("garbled@commit", &f, err, sizeof(err)), -EINVAL);
}

/* node-fault: a state knob of ocs-transceiver devices, alone or with others. */
static void test_fault_parser_node_fault(void **state)
{
	struct devsim_faults f;
	char err[256];
	assert_int_equal(devsim_faults_parse("node-fault", &f, err, sizeof(err)), 0);
	assert_true(f.node_fault);
	assert_int_equal(f.refuse_mask | f.drop_mask | f.sticky_mask, 0);
	assert_int_equal(devsim_faults_parse("refuse@commit,node-fault", &f, err, sizeof(err)), 0);
	assert_true(f.node_fault);
	assert_true(f.refuse_mask & (1u << DEVSIM_STEP_COMMIT));
	/* a set-faults without it heals the node */
	assert_int_equal(devsim_faults_parse("refuse@commit", &f, err, sizeof(err)), 0);
	assert_false(f.node_fault);
	assert_int_equal(devsim_faults_parse("", &f, err, sizeof(err)), 0);
	assert_false(f.node_fault);
	/* near misses are refused, naming the knob */
	assert_int_equal(devsim_faults_parse("node-fault=1", &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "node-fault=1"));
	assert_int_equal(devsim_faults_parse("node-faulty", &f, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "node-faulty"));
	assert_int_equal(devsim_faults_parse("node-fault@commit", &f, err, sizeof(err)), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_edit_operations),
		cmocka_unit_test(test_subtree_filter),
		cmocka_unit_test(test_fault_parser),
		cmocka_unit_test(test_fault_parser_node_fault),
		cmocka_unit_test(test_fault_parser_reply),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
