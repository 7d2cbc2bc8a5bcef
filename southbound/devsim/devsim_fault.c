/*
 * devsim_fault.c - parser of the ocs-devsim fault spec (devsim_fault.h).
 */
#include "devsim_fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static const char *const step_names[DEVSIM_STEP_COUNT] = {
	"lock",	   "unlock", "edit",	"validate", "commit",
	"confirm", "cancel", "discard", "get",	    "schema",
};

const char *devsim_step_name(enum devsim_step s)
{
	return (s >= 0 && s < DEVSIM_STEP_COUNT) ? step_names[s] : NULL;
}

static int parse_step(const char *s, size_t len)
{
	for (int i = 0; i < DEVSIM_STEP_COUNT; i++)
		if (strlen(step_names[i]) == len && !strncmp(s, step_names[i], len))
			return i;
	return -1;
}

static int parse_uint(const char *s, int max, int *out)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_knob(const char *knob, struct devsim_faults *f, char *err, size_t err_len)
{
	const char *at = strchr(knob, '@');
	if (!strcmp(knob, "node-fault")) {
		f->node_fault = true;
		return 0;
	}
	if (!strncmp(knob, "peer-port=", 10)) {
		const char *colon = strchr(knob + 10, ':');
		char num[16] = "";
		int p;
		if (colon && colon - (knob + 10) < (ptrdiff_t)sizeof(num))
			snprintf(num, sizeof(num), "%.*s", (int)(colon - (knob + 10)), knob + 10);
		if (!colon || parse_uint(num, 4095, &p) ||
		    strlen(colon + 1) > DEVSIM_PEER_PORT_LEN ||
		    f->n_peer_ports >= DEVSIM_MAX_FAILED_PORTS) {
			snprintf(err, err_len,
				 "fault '%s': expected peer-port=P:TEXT, port 0..4095, TEXT of at "
				 "most %d characters (at most %d ports)",
				 knob, DEVSIM_PEER_PORT_LEN, DEVSIM_MAX_FAILED_PORTS);
			return -EINVAL;
		}
		struct devsim_peer_port *pp = &f->peer_ports[f->n_peer_ports++];
		pp->port = p;
		snprintf(pp->text, sizeof(pp->text), "%s", colon + 1);
		return 0;
	}
	bool fail = !strncmp(knob, "fail-port=", 10);
	if (fail || !strncmp(knob, "refuse-port=", 12)) {
		int p;
		int *ports = fail ? f->failed_ports : f->refused_ports;
		int *n = fail ? &f->n_failed_ports : &f->n_refused_ports;
		if (parse_uint(strchr(knob, '=') + 1, 4095, &p) || *n >= DEVSIM_MAX_FAILED_PORTS) {
			snprintf(err, err_len,
				 "fault '%s': port must be 0..4095 (at most %d ports)", knob,
				 DEVSIM_MAX_FAILED_PORTS);
			return -EINVAL;
		}
		ports[(*n)++] = p;
		return 0;
	}
	if (!at) {
		snprintf(err, err_len,
			 "fault '%s': expected refuse@STEP, drop@STEP, hang@STEP=MS, "
			 "noeffect@commit, garble@STEP, trickle@STEP=MS, endless@STEP, "
			 "fail-port=P, refuse-port=P, peer-port=P:TEXT or node-fault",
			 knob);
		return -EINVAL;
	}
	size_t action_len = (size_t)(at - knob);
	const char *step_s = at + 1;
	const char *eq = strchr(step_s, '=');
	size_t step_len = eq ? (size_t)(eq - step_s) : strlen(step_s);
	size_t knob_len = strlen(knob);
	bool sticky = knob_len > 0 && knob[knob_len - 1] == '+';
	if (sticky && !eq)
		step_len--;
	char value[16] = "";
	if (eq)
		snprintf(value, sizeof(value), "%.*s",
			 (int)(knob + knob_len - eq - 1 - (sticky ? 1 : 0)), eq + 1);
	int step = parse_step(step_s, step_len);
	if (step < 0) {
		snprintf(err, err_len,
			 "fault '%s': unknown step (lock, unlock, edit, validate, commit, confirm, "
			 "cancel, discard, get, schema)",
			 knob);
		return -EINVAL;
	}
	uint32_t bit = 1u << step;
	if (sticky)
		f->sticky_mask |= bit;
	if (action_len == 6 && !strncmp(knob, "refuse", 6) && !eq) {
		f->refuse_mask |= bit;
	} else if (action_len == 4 && !strncmp(knob, "drop", 4) && !eq) {
		f->drop_mask |= bit;
	} else if (action_len == 8 && !strncmp(knob, "noeffect", 8) && !eq &&
		   step == DEVSIM_STEP_COMMIT) {
		f->noeffect_mask |= bit;
	} else if (action_len == 4 && !strncmp(knob, "hang", 4) && eq) {
		if (parse_uint(value, 600000, &f->hang_ms[step])) {
			snprintf(err, err_len, "fault '%s': hang time must be 0..600000 ms", knob);
			return -EINVAL;
		}
	} else if (action_len == 6 && !strncmp(knob, "garble", 6) && !eq) {
		f->garble_mask |= bit;
	} else if (action_len == 7 && !strncmp(knob, "endless", 7) && !eq) {
		f->endless_mask |= bit;
	} else if (action_len == 7 && !strncmp(knob, "trickle", 7) && eq) {
		if (parse_uint(value, 60000, &f->trickle_ms[step]) || !f->trickle_ms[step]) {
			snprintf(err, err_len, "fault '%s': trickle delay must be 1..60000 ms",
				 knob);
			return -EINVAL;
		}
	} else {
		snprintf(err, err_len,
			 "fault '%s': expected refuse@STEP, drop@STEP, hang@STEP=MS, "
			 "noeffect@commit, garble@STEP, trickle@STEP=MS, endless@STEP",
			 knob);
		return -EINVAL;
	}
	return 0;
}

int devsim_faults_parse(const char *spec, struct devsim_faults *out, char *err, size_t err_len)
{
	memset(out, 0, sizeof(*out));
	if (!spec || !*spec)
		return 0;
	char *copy = strdup(spec);
	if (!copy)
		return -ENOMEM;
	int rc = 0;
	char *save = NULL;
	for (char *knob = strtok_r(copy, ",", &save); knob && !rc;
	     knob = strtok_r(NULL, ",", &save))
		rc = parse_knob(knob, out, err, err_len);
	free(copy);
	return rc;
}
