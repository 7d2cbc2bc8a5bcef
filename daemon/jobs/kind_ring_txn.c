/*
 * kind_ring_txn.c - the ring job kind's part of a transaction (kind_txn.h):
 * the ops the driver takes a ring change through (txn_driver.h: per-node
 * targets from the ring state, the check of every external path, the
 * intent with its rings and settings, stored while the nodes prepare, and
 * the ring state given the job's new rings once confirmed), and the
 * recovery of ring intents a previous run left open (recovery.h: the
 * touched nodes' bundles read back against the intent's settings and what
 * the stored rings say each node held).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "devices.h"
#include "kind_txn.h"
#include "rings.h"
#include "sb_device.h"

/*
 * A ring transaction's state: the job's rings afterwards, per device the
 * planned settings (hbd and southbound), and per node whether an external
 * path may reach it (a healthy node of this job's new rings).
 */
struct krt_txn {
	struct rg_state *rg;
	char job_id[128];
	struct rg_ring *rings;
	size_t n_rings;
	size_t cap; /* entries of sb_targets and hbd_targets */
	struct sb_bundle **sb_targets;
	struct hbd_bundle **hbd_targets;
	bool *reachable;
	bool fault; /* a repair that stores its fault with the intent */
};

static void krt_free(void *state)
{
	struct krt_txn *t = state;

	if (!t)
		return;
	for (size_t i = 0; i < t->cap; i++) {
		if (t->sb_targets)
			free(t->sb_targets[i]);
		if (t->hbd_targets)
			free(t->hbd_targets[i]);
	}
	free(t->sb_targets);
	free(t->hbd_targets);
	free(t->reachable);
	rg_rings_free(t->rings, t->n_rings);
	free(t);
}

/*
 * The per-node targets of a ring transaction: for every node the change
 * names (in order of first mention), every bundle as the ring state has
 * it with the change's settings applied. Faulty nodes are skipped.
 */
static int krt_build(const struct txn_deps *d, const struct txn_change *c, struct txn_plan *p,
		     void **state)
{
	const struct krt_change *ch = c->kind_change;
	const struct rg_state *rg = ch->rings;
	int n_nodes = rg_nodes(rg), bundles = rg_domain(rg)->bundles;
	int *slot = malloc((size_t)(n_nodes + 1) * sizeof(*slot));
	size_t cap = ch->n_bundles + 1;
	struct krt_txn *t = calloc(1, sizeof(*t));

	*state = t;
	if (!t)
		goto oom;
	t->rg = ch->rings;
	snprintf(t->job_id, sizeof(t->job_id), "%s", c->job_id);
	t->fault = ch->fault != NULL;
	t->cap = cap;
	p->devs = calloc(cap, sizeof(*p->devs));
	p->dev_ids = calloc(cap, sizeof(*p->dev_ids));
	t->sb_targets = calloc(cap, sizeof(*t->sb_targets));
	t->hbd_targets = calloc(cap, sizeof(*t->hbd_targets));
	t->reachable = calloc((size_t)n_nodes + 1, sizeof(*t->reachable));
	if (!slot || !p->devs || !p->dev_ids || !t->sb_targets || !t->hbd_targets || !t->reachable)
		goto oom;
	for (int i = 0; i < n_nodes; i++)
		slot[i] = -1;
	for (size_t r = 0; r < ch->n_rings; r++)
		for (int k = 0; k < ch->job_rings[r].m; k++) {
			int node = ch->job_rings[r].nodes[k];

			if (node >= 0 && node < n_nodes)
				t->reachable[node] = !rg_faulty(rg, node);
		}
	for (size_t i = 0; i < ch->n_bundles; i++) {
		const struct hbd_bundle *b = &ch->bundles[i];
		int node = b->node;

		if (node < 0 || node >= n_nodes || b->bundle >= bundles || rg_faulty(rg, node))
			continue;
		if (slot[node] < 0) {
			size_t k = p->n_devs++;

			slot[node] = (int)k;
			p->dev_ids[k] = node;
			t->hbd_targets[k] = malloc((size_t)bundles * sizeof(struct hbd_bundle));
			t->sb_targets[k] = malloc((size_t)bundles * sizeof(struct sb_bundle));
			if (!t->hbd_targets[k] || !t->sb_targets[k] ||
			    rg_node_bundles(rg, node, t->hbd_targets[k]) != 0)
				goto oom;
		}
		t->hbd_targets[slot[node]][b->bundle] = *b;
	}
	for (size_t k = 0; k < p->n_devs; k++) {
		for (int b = 0; b < bundles; b++) {
			const struct hbd_bundle *h = &t->hbd_targets[k][b];

			t->sb_targets[k][b] =
				(struct sb_bundle){h->bundle, h->path, h->distance, h->dir};
		}
		p->devs[k] =
			(struct sb_txn_device){dev_handle(d->devs, p->dev_ids[k], DEV_ROLE_TXN),
					       NULL, 0, t->sb_targets[k], (size_t)bundles};
	}
	t->rings = rg_rings_dup(ch->job_rings, ch->n_rings);
	if (!t->rings)
		goto oom;
	t->n_rings = ch->n_rings;
	free(slot);
	return 0;
oom:
	free(slot);
	return -ENOMEM;
}

/*
 * The check of a ring transaction (engine thread, on the copies made at
 * the start): every external path of every node reaches the node the
 * plan says, and that node is a healthy node of this job's new rings.
 */
static int krt_verify(void *state, const struct txn_plan *p, enum sb_verify_phase phase,
		      const struct sb_device_xcs *devices, size_t n, char *why, size_t why_len)
{
	const struct krt_txn *t = state;
	const struct rg_state *rg = t->rg;
	int bundles = rg_domain(rg)->bundles;

	for (size_t i = 0; i < n; i++) {
		int node = p->dev_ids[devices[i].index];
		const struct hbd_bundle *plan = t->hbd_targets[devices[i].index];

		for (size_t b = 0; b < devices[i].n_bundles; b++) {
			const struct sb_bundle_state *st = &devices[i].bundles[b];
			int want = st->set.bundle < bundles ? plan[st->set.bundle].peer : -1;
			int got = phase == SB_VERIFY_PLAN ? want : st->peer_node;

			if (phase == SB_VERIFY_READBACK && got != want) {
				snprintf(why, why_len,
					 "read-back: node %d bundle %u reaches node %d, the plan "
					 "says %d",
					 node, st->set.bundle, got, want);
				return -EPROTO;
			}
			if (got >= 0 && (got >= rg_nodes(rg) || !t->reachable[got])) {
				snprintf(why, why_len,
					 "%s: node %d bundle %u points at node %d, which is faulty "
					 "or "
					 "not in a ring of job %s",
					 phase == SB_VERIFY_PLAN ? "plan" : "read-back", node,
					 st->set.bundle, got, t->job_id);
				return -EPROTO;
			}
		}
	}
	return 0;
}

/* Stores a ring transaction's intent: its rings and every target setting. */
static int krt_intent(void *state, const struct txn_deps *d, const struct txn_change *c,
		      const struct txn_plan *p, int64_t *txn_id)
{
	const struct krt_txn *t = state;
	const struct krt_change *ch = c->kind_change;
	int bundles = rg_domain(t->rg)->bundles;
	size_t n = p->n_devs * (size_t)bundles, at = 0;
	struct st_bundle *b = malloc((n ? n : 1) * sizeof(*b));
	int rc;

	if (!b)
		return -ENOMEM;
	for (size_t k = 0; k < p->n_devs; k++)
		for (int i = 0; i < bundles; i++) {
			const struct hbd_bundle *h = &t->hbd_targets[k][i];

			b[at++] = (struct st_bundle){p->dev_ids[k], h->bundle, h->path, h->distance,
						     h->dir};
		}
	rc = st_ring_intent_begin(d->store, t->job_id, t->rings, t->n_rings, b, n, ch->fault,
				  clk_wall_ms(d->clock), txn_id);
	free(b);
	return rc;
}

/* Once confirmed: the ring state takes the job's new rings. */
static int krt_apply(void *state, int64_t txn_id, char *why, size_t why_len)
{
	const struct krt_txn *t = state;

	if (rg_set_job_rings(t->rg, t->job_id, t->rings, t->n_rings) == 0)
		return 0;
	snprintf(why, why_len, "cannot apply transaction %lld to the ring state in memory",
		 (long long)txn_id);
	return -ENOMEM;
}

static const char *krt_profile_note(const void *state)
{
	const struct krt_txn *t = state;

	return t->fault ? ", fault repair" : "";
}

const struct txn_kind_ops krt_ops = {
	.build = krt_build,
	.verify = krt_verify,
	.intent = krt_intent,
	.overlapped = true,
	.apply = krt_apply,
	.profile_note = krt_profile_note,
	.free_state = krt_free,
};

/* ---- recovery of ring intents ---- */

/* Bundles b (n, any order) of node as a full array of `bundles` entries (absent: loopback). */
static void full_bundles(int bundles, const struct sb_bundle *b, size_t n, size_t stride,
			 struct sb_bundle *out)
{
	for (int i = 0; i < bundles; i++)
		out[i] = (struct sb_bundle){(uint8_t)i, 0, 0, 0};
	for (size_t i = 0; i < n; i++) {
		const struct sb_bundle *x =
			(const struct sb_bundle *)((const char *)b + i * stride);

		if (x->bundle < bundles)
			out[x->bundle] = *x;
	}
}

static bool same_bundles(const struct sb_bundle *a, const struct sb_bundle *b, int n)
{
	for (int i = 0; i < n; i++)
		if (!sb_bundle_equal(&a[i], &b[i]))
			return false;
	return true;
}

/*
 * Reads node back (running datastore) and says whether it holds the
 * intent's settings for it (target) and what the ring state says it held
 * before (pre). false when it cannot be read (why in detail).
 */
static bool read_node(struct rg_state *rg, const struct recov_deps *rd, const struct st_intent *in,
		      int node, bool *at_target, bool *at_pre, struct sb_bundle *want_out,
		      char *detail, size_t len)
{
	int bundles = rg_domain(rg)->bundles;
	struct sb_bundle got[bundles], want[bundles], pre[bundles];
	struct hbd_bundle old[bundles];
	struct sb_bundle_state *st = NULL;
	struct sb_error err = {0};
	size_t n = 0, k = 0;

	struct sb_device *h = dev_handle(rd->devs, node, DEV_ROLE_TXN);

	if (!h || sb_device_connect_until(h, sb_now_ms() + RECOV_CONNECT_MS, &err) != 0 ||
	    sb_device_read_bundles(h, false, SB_DS_RUNNING, &st, &n, NULL, &err) != 0) {
		snprintf(detail + strlen(detail), len - strlen(detail), "node %d unreadable (%s); ",
			 node, err.message);
		return false;
	}
	full_bundles(bundles, &st[0].set, n, sizeof(*st), got);
	free(st);
	for (int i = 0; i < bundles; i++)
		want[i] = (struct sb_bundle){(uint8_t)i, 0, 0, 0};
	for (size_t i = 0; i < in->n_bundles; i++)
		if (in->bundles[i].node == node && in->bundles[i].bundle < bundles)
			want[in->bundles[i].bundle] =
				(struct sb_bundle){in->bundles[i].bundle, in->bundles[i].path,
						   in->bundles[i].distance, in->bundles[i].dir};
	if (rg_node_bundles(rg, node, old) != 0)
		return false;
	for (k = 0; k < (size_t)bundles; k++)
		pre[k] =
			(struct sb_bundle){old[k].bundle, old[k].path, old[k].distance, old[k].dir};
	*at_target = same_bundles(got, want, bundles);
	*at_pre = same_bundles(got, pre, bundles);
	memcpy(want_out, want, sizeof(want));
	return true;
}

/*
 * The recovery of an intent of a ring domain: as recovery.c resolves one of circuits,
 * the nodes' bundles read back against the intent's settings (target) and
 * what the ring state says each node held (pre-image).
 */
static int resolve_ring_intent(struct rg_state *rg, const struct recov_deps *rd,
			       const struct st_intent *in)
{
	int n_nodes = rg_nodes(rg), bundles = rg_domain(rg)->bundles;
	char *seen = calloc((size_t)n_nodes + 1, 1);
	struct sb_bundle *wants = calloc((size_t)n_nodes * (size_t)bundles + 1, sizeof(*wants));
	struct sb_txn_device *devs = calloc((size_t)n_nodes + 1, sizeof(*devs));
	bool *fenced = calloc((size_t)n_nodes + 1, sizeof(*fenced));
	bool *touched = calloc((size_t)n_nodes + 1, sizeof(*touched));
	struct recov_seen shown = {true, true, true, true, 0};
	enum st_intent_state outcome;
	char detail[512] = "";
	size_t n = 0;
	int rc = 0;

	if (!seen || !wants || !devs || !fenced || !touched) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < in->n_bundles; i++)
		if (in->bundles[i].node >= 0 && in->bundles[i].node < n_nodes)
			touched[in->bundles[i].node] = true;
	recov_fence(rd, in, touched, fenced, n_nodes);
	for (size_t i = 0; i < in->n_bundles; i++) {
		int node = in->bundles[i].node;
		struct sb_bundle *want = &wants[(size_t)node * (size_t)bundles];
		bool at_target = false, at_pre = false, unproven;

		if (node < 0 || node >= n_nodes || seen[node])
			continue;
		seen[node] = 1;
		if (!read_node(rg, rd, in, node, &at_target, &at_pre, want, detail,
			       sizeof(detail))) {
			shown.all_target = shown.all_pre = shown.all_read = false;
			continue;
		}
		/* as recovery.c's resolve_circuit_intent: a target the fence did not prove */
		unproven =
			at_target && !at_pre && recov_holds_unconfirmed(rd, node) && !fenced[node];
		shown.unconfirmed += unproven;
		if (unproven && in->decided)
			devs[n++] = (struct sb_txn_device){dev_handle(rd->devs, node, DEV_ROLE_TXN),
							   NULL, 0, want, (size_t)bundles};
		shown.all_target &= at_target && !(unproven && in->decided);
		shown.all_pre &= at_pre;
		if (!at_target)
			devs[n++] = (struct sb_txn_device){dev_handle(rd->devs, node, DEV_ROLE_TXN),
							   NULL, 0, want, (size_t)bundles};
		if (!at_target && !at_pre)
			shown.all_known = false;
		if (!at_target && !at_pre)
			snprintf(detail + strlen(detail), sizeof(detail) - strlen(detail),
				 "node %d holds neither the old nor the new settings; ", node);
	}
	recov_unfence(rd, fenced, n_nodes); /* before recov_finish_decided's engine locks them */
	if (recov_verdict(in, &shown, "node", "nodes back as they were", &outcome, detail,
			  sizeof(detail)))
		outcome = recov_finish_decided(rd, in, devs, n, shown.all_pre, detail,
					       sizeof(detail));
	rc = recov_record(rd, in, "ring transaction", outcome, detail);
	if (rc == 0 && outcome == ST_INTENT_CONFIRMED)
		rc = rg_set_job_rings(rg, in->job_id, in->rings, in->n_rings);
out:
	free(touched);
	free(fenced);
	free(devs);
	free(wants);
	free(seen);
	return rc;
}

bool krt_owns(const struct st_intent *in)
{
	return in->has_rings;
}

int krt_resolve(void *ctx, const struct recov_deps *rd, const struct st_intent *in)
{
	return ctx ? resolve_ring_intent(ctx, rd, in) : -EINVAL;
}
