/*
 * store_etcd.c - the etcd backend of the state store (store_etcd.h): a
 * replicated log of SQLite changesets in etcd, applied to an in-memory
 * SQLite copy (store.c through store_repl.h).
 *
 * The copy's position is (seq, head_rev): the last entry applied and the
 * mod revision the head key had when that entry was written. Invariants:
 *  1. The copy holds exactly the entries 1..seq of the log (or a snapshot at
 *     some s <= seq and the entries s+1..seq), applied in order.
 *  2. A write is published as entry seq+1 only by an etcd transaction whose
 *     compare proves the head still has mod revision head_rev, i.e. that
 *     the log ends at seq: the log is a single chain, never a fork.
 *  3. The local COMMIT follows a successful publish; a failed one rolls the
 *     write back. When the outcome is unknown (etcd did not answer) the
 *     entry is looked for; if that fails too, the copy is marked stale and
 *     catches up (st_etcd_sync) before its next write, which then either
 *     finds its own entry in the log or not: either way invariant 1 holds.
 *  4. Deleted log entries are only those a snapshot covers, less its last
 *     log_tail entries; a replica that finds a gap (the entry after its seq
 *     is gone) loads the snapshot. The tail is for a writer whose answer was
 *     lost (a pause, a dropped connection): it reads its entry back to learn
 *     whether its write went in (entry_is_ours), and a successor that took
 *     over meanwhile may already have written a snapshot. Should the entry
 *     be gone all the same, the write's outcome is unknown (-EINPROGRESS),
 *     never "refused".
 *
 *  5. A changeset of DEFLATE_MIN bytes or more is stored deflated (zlib,
 *     "#z BYTES\n" then the stream) when that is smaller: the changesets of
 *     an intent compress 7 to 17 times, and every byte costs base64, the
 *     gateway's JSON and raft. An entry (deflated or not) larger than
 *     chunk_bytes is staged first, in chunks under keys
 *     of its own that no reader looks at, and becomes visible only through
 *     the one fenced transaction that puts its log entry: a record naming
 *     the chunks (CHUNKED_RECORD). A reader sees the whole changeset or
 *     none of it; chunks of a write that never landed are orphans, deleted
 *     at once when the compare refused the write, else with the log entries
 *     of their seq when a snapshot prunes the log.
 *
 * States of a copy: current (seq = head), behind (a watch event or a
 * failed compare says so: sync), stale (outcome unknown: sync before the
 * next write). A snapshot is taken before a write begins (prepare hook),
 * when snapshot_every entries passed since the last one, so that the image
 * is of committed data only; writing it to etcd is the snapshot thread's:
 *
 *   none --due at a prepare: image taken on the loop, thread started--> writing
 *   writing --chunks, then the fenced switch (thread)--> ended
 *   ended --the next prepare (or st_etcd_snapshot_wait, destroy) joins it--> none
 *
 * One snapshot is written at a time. The thread owns its job (the image,
 * its own etcd client: a client belongs to one thread) until it sets
 * `ended`; it reads of the st_etcd only the keys and chunk_bytes, which
 * never change after open. The switch compares the leader key (the fence)
 * and the snapshot record's mod revision as read when the image was taken,
 * not the head: the leader's writes go on meanwhile, and the entries the
 * switch deletes are older than the image's seq anyway (invariant 4).
 */
#include "store_etcd.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "store_repl.h"

#define ST_ETCD_SNAPSHOT_EVERY 1000
#define ST_ETCD_CHUNK_BYTES    (1u << 20)
/* The largest snapshot image a replica loads (a record saying more is refused). */
#define ST_ETCD_MAX_SNAPSHOT (4ull << 30)
/* Log entries and snapshot chunks read per range request (bounded answers). */
#define ST_ETCD_PAGE 128
/* Entries a snapshot leaves in the log (at most half of snapshot_every): invariant 4. */
#define ST_ETCD_LOG_TAIL 128
/* The log entry of a chunked write (invariant 5): "#chunked CHUNKS BYTES TAG"
 * (TAG in hex). A SQLite changeset starts with 'T' or 'P', never '#'. */
#define CHUNKED_RECORD "#chunked "
#define CHUNKED_MAX    96 /* the longest record */
/* A deflated changeset (invariant 5): "#z BYTES\n" (BYTES: inflated), then a zlib stream. */
#define DEFLATED    "#z "
#define DEFLATE_MIN 1024

struct snap_job;

struct st_etcd {
	struct st_store *st; /* the copy; owns this backend */
	struct etcd_client *c;
	struct etcd_opts eopts; /* a copy (strings owned), for the snapshot thread's client */
	struct snap_job *job;	/* the snapshot being written, NULL: none */
	char *prefix;
	char head_key[600], snap_key[600], log_prefix[600], snap_prefix[600], chunk_prefix[600];
	uint64_t seq;	   /* the last entry applied */
	int64_t head_rev;  /* the head's mod revision at seq; 0: no head yet */
	int64_t rev_seen;  /* the etcd revision the copy is known current at */
	bool stale;	   /* outcome of a write unknown: sync before the next */
	uint64_t snap_seq; /* the newest snapshot known (written or loaded) */
	unsigned snapshot_every;
	unsigned log_tail;  /* invariant 4 */
	size_t chunk_bytes; /* of a snapshot, and the largest entry not chunked */
	void *genesis;	    /* image of the empty store (sqlite3 memory) */
	size_t genesis_len;
	uint8_t *fence_key;
	size_t fence_key_len;
	int64_t fence_rev;
	struct etcd_watch *watch;
	void (*on_change)(void *ctx);
	void *on_change_ctx;
	char error[768];
};

static void set_error(struct st_etcd *se, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_error(struct st_etcd *se, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(se->error, sizeof(se->error), fmt, ap);
	va_end(ap);
}

const char *st_etcd_last_error(const struct st_etcd *se)
{
	return se->error;
}

struct etcd_client *st_etcd_client(struct st_etcd *se)
{
	return se->c;
}

uint64_t st_etcd_seq(const struct st_etcd *se)
{
	return se->seq;
}

/* A failure of the etcd client: the store's code, and the client's words. */
static int etcd_failed(struct st_etcd *se, const char *what, int rc)
{
	set_error(se, "etcd: %s: %s", what,
		  *etcd_last_error(se->c) ? etcd_last_error(se->c) : strerror(-rc));
	return rc == -ENOMEM ? -ENOMEM : -EIO;
}

static void log_key(const struct st_etcd *se, uint64_t seq, char *key, size_t len)
{
	snprintf(key, len, "%s%016" PRIx64, se->log_prefix, seq);
}

/* The sequence number of a log key; 0 when it is not one. */
static uint64_t log_seq(const struct st_etcd *se, const uint8_t *key, size_t len)
{
	size_t plen = strlen(se->log_prefix);
	char digits[17];
	char *end;
	uint64_t seq;

	if (len != plen + 16 || memcmp(key, se->log_prefix, plen) != 0)
		return 0;
	memcpy(digits, key + plen, 16);
	digits[16] = 0;
	seq = strtoull(digits, &end, 16);
	return *end ? 0 : seq;
}

/* ---- reading etcd into the copy ---- */

/*
 * Reads the chunks under prefix (keys prefix %08x i, in order) as etcd had
 * them at revision rev (0: now): *out (caller frees) of exactly bytes bytes
 * in exactly chunks chunks, else -EPROTO (chunks missing, more or larger
 * than recorded), or etcd's failure (-EIO, -ENOMEM; se->error says).
 */
static int read_chunks(struct st_etcd *se, const char *prefix, unsigned long long chunks,
		       unsigned long long bytes, int64_t rev, uint8_t **out)
{
	uint8_t *image = malloc(bytes), *end;
	size_t got = 0, end_len;
	unsigned long long i = 0;
	int rc = 0;

	*out = NULL;
	end = etcd_prefix_end(prefix, strlen(prefix), &end_len);
	if (!image || !end) {
		free(image);
		free(end);
		return -ENOMEM;
	}
	/* chunk keys sort in order; read them a page at a time */
	while (i < chunks && rc == 0) {
		struct etcd_kvs r;
		char from[720];

		snprintf(from, sizeof(from), "%s%08llx", prefix, i);
		rc = etcd_range(se->c, from, strlen(from), end, end_len, 8, rev, &r);
		if (rc) {
			rc = etcd_failed(se, "reading chunks", rc);
			break;
		}
		if (r.n == 0)
			rc = -EPROTO;
		for (size_t k = 0; rc == 0 && k < r.n; k++, i++) {
			if (i >= chunks || got + r.kvs[k].value_len > bytes)
				rc = -EPROTO;
			else
				memcpy(image + got, r.kvs[k].value, r.kvs[k].value_len);
			got += r.kvs[k].value_len;
		}
		etcd_kvs_clear(&r);
	}
	free(end);
	if (rc == 0 && got != bytes)
		rc = -EPROTO;
	if (rc)
		free(image);
	else
		*out = image;
	return rc;
}

/* Loads the snapshot etcd has at revision rev (none: the empty store). */
static int load_snapshot(struct st_etcd *se, int64_t rev)
{
	struct etcd_kvs r;
	unsigned long long seq = 0, chunks = 0, bytes = 0, tag = 0;
	char prefix[700], err[256];
	uint8_t *image = NULL;
	int rc = etcd_range(se->c, se->snap_key, strlen(se->snap_key), NULL, 0, 0, rev, &r);

	if (rc)
		return etcd_failed(se, "reading the snapshot", rc);
	if (r.n == 0) {
		etcd_kvs_clear(&r);
		rc = st_image_load(se->st, se->genesis, se->genesis_len, err, sizeof(err));
		if (rc)
			set_error(se, "resetting the copy: %s", err);
		se->seq = 0;
		return rc;
	}
	if (sscanf((const char *)r.kvs[0].value, "%llu %llu %llu %llx", &seq, &chunks, &bytes,
		   &tag) != 4 ||
	    seq == 0 || chunks == 0 || bytes == 0 || bytes > ST_ETCD_MAX_SNAPSHOT ||
	    chunks > bytes) {
		set_error(se, "etcd: %s: not a snapshot record", se->snap_key);
		etcd_kvs_clear(&r);
		return -EPROTO;
	}
	etcd_kvs_clear(&r);
	snprintf(prefix, sizeof(prefix), "%s%016llx-%016llx/", se->snap_prefix, seq, tag);
	rc = read_chunks(se, prefix, chunks, bytes, rev, &image);
	if (rc == -EPROTO)
		set_error(se, "etcd: snapshot %llu: chunks missing or larger than recorded", seq);
	if (rc == 0) {
		rc = st_image_load(se->st, image, bytes, err, sizeof(err));
		if (rc)
			set_error(se, "etcd: snapshot %llu: %s", seq, err);
	}
	free(image);
	if (rc == 0) {
		se->seq = seq;
		se->snap_seq = seq;
	}
	return rc;
}

/* The prefix of the chunks of log entry seq staged with tag (invariant 5). */
static void entry_chunks(const struct st_etcd *se, uint64_t seq, uint64_t tag, char *prefix,
			 size_t len)
{
	snprintf(prefix, len, "%s%016" PRIx64 "-%016" PRIx64 "/", se->chunk_prefix, seq, tag);
}

static bool is_chunked(const struct etcd_kv *kv)
{
	size_t n = strlen(CHUNKED_RECORD);

	return kv->value_len >= n && memcmp(kv->value, CHUNKED_RECORD, n) == 0;
}

/*
 * The changeset of chunked entry seq (kv, its record), read as etcd had it
 * at revision rev (0: now): *out (caller frees), *len.
 */
static int read_chunked_entry(struct st_etcd *se, uint64_t seq, const struct etcd_kv *kv,
			      int64_t rev, uint8_t **out, size_t *len)
{
	char record[CHUNKED_MAX + 1], prefix[700];
	unsigned long long chunks = 0, bytes = 0, tag = 0;
	int end = 0, rc;

	if (kv->value_len > CHUNKED_MAX)
		goto bad;
	memcpy(record, kv->value, kv->value_len);
	record[kv->value_len] = 0;
	if (sscanf(record, CHUNKED_RECORD "%llu %llu %llx%n", &chunks, &bytes, &tag, &end) != 3 ||
	    (size_t)end != kv->value_len || chunks == 0 || bytes == 0 ||
	    bytes > ST_ETCD_MAX_SNAPSHOT || chunks > bytes)
		goto bad;
	entry_chunks(se, seq, tag, prefix, sizeof(prefix));
	rc = read_chunks(se, prefix, chunks, bytes, rev, out);
	if (rc == -EPROTO)
		set_error(se, "etcd: log entry %" PRIu64 ": chunks missing or larger than recorded",
			  seq);
	*len = bytes;
	return rc;
bad:
	set_error(se, "etcd: log entry %" PRIu64 ": not a chunked entry's record", seq);
	return -EPROTO;
}

/*
 * The entry to store for changeset: *out (caller frees) deflated when that
 * is smaller, else NULL (store the changeset as it is). 0 or -ENOMEM.
 */
static int deflate_changeset(const void *changeset, size_t len, uint8_t **out, size_t *out_len)
{
	char head[32];
	int n = snprintf(head, sizeof(head), DEFLATED "%zu\n", len);
	uLongf z_len = compressBound(len);
	uint8_t *z;

	*out = NULL;
	if (len < DEFLATE_MIN)
		return 0;
	z = malloc((size_t)n + z_len);
	if (!z)
		return -ENOMEM;
	memcpy(z, head, (size_t)n);
	if (compress2(z + n, &z_len, changeset, len, Z_BEST_SPEED) != Z_OK ||
	    (size_t)n + z_len >= len) {
		free(z);
		return 0;
	}
	*out = z;
	*out_len = (size_t)n + z_len;
	return 0;
}

static bool is_deflated(const uint8_t *entry, size_t len)
{
	return len > strlen(DEFLATED) && memcmp(entry, DEFLATED, strlen(DEFLATED)) == 0;
}

/* The changeset of deflated entry seq: *out (caller frees), *out_len. */
static int inflate_entry(struct st_etcd *se, uint64_t seq, const uint8_t *entry, size_t len,
			 uint8_t **out, size_t *out_len)
{
	char head[32];
	unsigned long long bytes = 0;
	int end = 0;
	size_t n = len < sizeof(head) - 1 ? len : sizeof(head) - 1;
	uLongf got;
	uint8_t *raw;

	memcpy(head, entry, n);
	head[n] = 0;
	if (sscanf(head, DEFLATED "%llu%n", &bytes, &end) != 1 || (size_t)end >= n ||
	    head[end] != '\n' || bytes == 0 || bytes > ST_ETCD_MAX_SNAPSHOT)
		goto bad;
	raw = malloc(bytes);
	if (!raw)
		return -ENOMEM;
	got = bytes;
	if (uncompress(raw, &got, entry + end + 1, len - (size_t)end - 1) != Z_OK || got != bytes) {
		free(raw);
		goto bad;
	}
	*out = raw;
	*out_len = bytes;
	return 0;
bad:
	set_error(se, "etcd: log entry %" PRIu64 ": not a deflated changeset", seq);
	return -EPROTO;
}

/*
 * Applies one entry (its seq must follow the copy's); a chunked one's
 * chunks are read as etcd had them at revision rev (0: now).
 */
static int apply_entry(struct st_etcd *se, uint64_t seq, const struct etcd_kv *kv, int64_t rev)
{
	uint8_t *joined = NULL, *raw = NULL;
	const uint8_t *entry = kv->value;
	size_t len = kv->value_len;
	int rc = 0;

	if (seq != se->seq + 1) {
		set_error(se, "etcd: log entry %" PRIu64 " after %" PRIu64, seq, se->seq);
		return -EPROTO;
	}
	if (is_chunked(kv)) {
		rc = read_chunked_entry(se, seq, kv, rev, &joined, &len);
		entry = joined;
	}
	if (rc == 0 && is_deflated(entry, len)) {
		rc = inflate_entry(se, seq, entry, len, &raw, &len);
		entry = raw;
	}
	if (rc == 0) {
		rc = st_apply_changeset(se->st, entry, len);
		if (rc)
			set_error(se, "log entry %" PRIu64 " does not apply to this copy (%s)", seq,
				  strerror(-rc));
	}
	free(raw);
	free(joined);
	if (rc)
		return rc;
	se->seq = seq;
	se->head_rev = kv->mod_revision;
	return 0;
}

/*
 * Applies the entries after the copy's seq up to head_seq, as etcd had them
 * at revision rev. *gap: the next entry is gone (a snapshot covers it).
 */
static int read_log(struct st_etcd *se, uint64_t head_seq, int64_t rev, bool *gap)
{
	uint8_t *end;
	size_t end_len;
	int rc = 0;

	*gap = false;
	end = etcd_prefix_end(se->log_prefix, strlen(se->log_prefix), &end_len);
	if (!end)
		return -ENOMEM;
	while (rc == 0 && se->seq < head_seq) {
		struct etcd_kvs r;
		char from[700];

		log_key(se, se->seq + 1, from, sizeof(from));
		rc = etcd_range(se->c, from, strlen(from), end, end_len, ST_ETCD_PAGE, rev, &r);
		if (rc) {
			rc = etcd_failed(se, "reading the log", rc);
			break;
		}
		if (r.n == 0 || log_seq(se, r.kvs[0].key, r.kvs[0].key_len) != se->seq + 1) {
			*gap = true;
			etcd_kvs_clear(&r);
			break;
		}
		for (size_t i = 0; rc == 0 && i < r.n; i++)
			rc = apply_entry(se, log_seq(se, r.kvs[i].key, r.kvs[i].key_len), &r.kvs[i],
					 rev);
		etcd_kvs_clear(&r);
	}
	free(end);
	return rc;
}

/*
 * Catches up: reads the head, then the log after seq (or the snapshot and
 * the log after it when the log has a gap or the copy does not fit it), all
 * at the head's revision.
 */
static int sync_copy(struct st_etcd *se)
{
	struct etcd_kvs r;
	unsigned long long head_seq = 0;
	int64_t head_mod = 0, rev;
	bool gap = false;
	int rc = etcd_range(se->c, se->head_key, strlen(se->head_key), NULL, 0, 0, 0, &r);

	if (rc)
		return etcd_failed(se, "reading the head", rc);
	rev = r.revision;
	if (r.n == 1) {
		head_mod = r.kvs[0].mod_revision;
		if (sscanf((const char *)r.kvs[0].value, "%llu", &head_seq) != 1)
			rc = -EPROTO;
	}
	etcd_kvs_clear(&r);
	if (rc || head_seq < se->seq) {
		set_error(se, "etcd: %s is %llu, behind this copy's %" PRIu64 " (etcd lost data?)",
			  se->head_key, head_seq, se->seq);
		return -EPROTO;
	}
	rc = read_log(se, head_seq, rev, &gap);
	for (int attempt = 0; attempt < 2 && (gap || rc == -EPROTO || se->seq != head_seq);
	     attempt++) {
		/* start over from the snapshot (or the empty store) */
		rc = load_snapshot(se, rev);
		if (rc == 0)
			rc = read_log(se, head_seq, rev, &gap);
		if (rc == -EIO || rc == -ENOMEM)
			break;
	}
	if (rc == 0 && se->seq != head_seq) {
		set_error(se, "etcd: the log does not reach its head %llu (copy at %" PRIu64 ")",
			  head_seq, se->seq);
		rc = -EPROTO;
	}
	if (rc)
		return rc;
	se->head_rev = head_mod;
	se->rev_seen = rev;
	se->stale = false;
	return 0;
}

int st_etcd_sync(struct st_etcd *se)
{
	bool changed;
	uint64_t before = se->seq;
	int rc = sync_copy(se);

	changed = se->seq != before;
	if (rc == 0 && changed && se->on_change)
		se->on_change(se->on_change_ctx);
	return rc;
}

/* ---- writing: the log entry, the fence, snapshots ---- */

static int current_snapshot(struct st_etcd *se, char *old, size_t len, uint64_t *seq,
			    int64_t *mod_rev);

/*
 * Is log entry seq + 1 (key) exactly changeset? 1 yes (se advanced), 0 no
 * (another entry, or none and the log not past it), -EINPROGRESS when it is
 * gone and a snapshot covers it (whose it was cannot be told: invariant 4),
 * < 0 etcd's error.
 */
static int entry_is_ours(struct st_etcd *se, const char *key, const void *changeset, size_t len)
{
	struct etcd_kvs r;
	char old[700];
	uint64_t snap = 0;
	int rc = etcd_range(se->c, key, strlen(key), NULL, 0, 0, 0, &r);
	bool ours = rc == 0 && r.n == 1 && r.kvs[0].value_len == len &&
		    memcmp(r.kvs[0].value, changeset, len) == 0;
	bool gone = rc == 0 && r.n == 0;

	if (ours) {
		se->seq++;
		se->head_rev = r.kvs[0].mod_revision;
	}
	etcd_kvs_clear(&r);
	if (rc == 0 && gone)
		rc = current_snapshot(se, old, sizeof(old), &snap, NULL);
	if (rc == 0 && gone && snap > se->seq)
		return -EINPROGRESS;
	return rc ? rc : ours;
}

/* Why a fenced write's compare failed: the fence (-EPERM) or another writer (-EBUSY). */
static int compare_failed(struct st_etcd *se)
{
	if (se->fence_key) {
		struct etcd_kvs r;
		int rc = etcd_range(se->c, se->fence_key, se->fence_key_len, NULL, 0, 0, 0, &r);
		bool held = rc == 0 && r.n == 1 && r.kvs[0].create_revision == se->fence_rev;

		etcd_kvs_clear(&r);
		if (rc == 0 && !held) {
			set_error(se, "etcd: the leader key is no longer this replica's: not the "
				      "leader");
			return -EPERM;
		}
	}
	set_error(se, "etcd: another writer extended the log past entry %" PRIu64, se->seq);
	se->stale = true;
	return -EBUSY;
}

/*
 * The write's entry could not be read back (err: why): it may be in the log
 * or still land, so the copy catches up before its next write and the
 * caller is told the outcome is unknown (-EINPROGRESS, store.h).
 */
static int publish_unknown_outcome(struct st_etcd *se, const char *why)
{
	set_error(se,
		  "etcd: %s; whether this write went in is unknown until this replica reads the "
		  "log again",
		  why);
	se->stale = true;
	return -EINPROGRESS;
}

/*
 * A publish whose compare failed: the entry may be ours after all (0). The
 * client sends a transaction again to the next endpoint when the first
 * attempt's answer is lost, and that attempt may have gone in (under the
 * fence: etcd compares and writes at once); else compare_failed says why.
 */
static int publish_refused(struct st_etcd *se, const char *key, const void *changeset, size_t len)
{
	int rc = entry_is_ours(se, key, changeset, len);
	char why[200];

	if (rc == 1)
		return 0;
	if (rc == 0)
		return compare_failed(se);
	snprintf(why, sizeof(why),
		 rc == -EINPROGRESS ? "entry %" PRIu64 " was folded into a snapshot before it "
				      "could be read back"
				    : "entry %" PRIu64 " could not be read back",
		 se->seq + 1);
	return rc == -ENOMEM ? -ENOMEM : publish_unknown_outcome(se, why);
}

/* The outcome of a publish etcd did not answer: is entry seq ours? */
static int publish_unknown(struct st_etcd *se, const char *key, const void *changeset, size_t len,
			   int txn_rc)
{
	char why[sizeof(se->error)];

	if (txn_rc == -ENOMEM) /* never sent */
		return -ENOMEM;
	/* the transaction's failure is the one to report */
	snprintf(why, sizeof(why), "writing the log: %s",
		 *etcd_last_error(se->c) ? etcd_last_error(se->c) : strerror(-txn_rc));
	if (entry_is_ours(se, key, changeset, len) == 1)
		return 0;
	return publish_unknown_outcome(se, why); /* it may still land */
}

/*
 * The compares every write of the log makes (cmps has room for two): the
 * head is as this copy last read it, and, with a fence, the leader key is
 * still the one this replica created. Returns how many.
 */
static size_t write_cmps(const struct st_etcd *se, struct etcd_cmp *cmps)
{
	cmps[0] = (struct etcd_cmp){.key = se->head_key,
				    .key_len = strlen(se->head_key),
				    .target = ETCD_CMP_MOD,
				    .result = ETCD_CMP_EQUAL,
				    .number = se->head_rev};
	cmps[1] = (struct etcd_cmp){.key = se->fence_key,
				    .key_len = se->fence_key_len,
				    .target = ETCD_CMP_CREATE,
				    .result = ETCD_CMP_EQUAL,
				    .number = se->fence_rev};
	return se->fence_key ? 2 : 1;
}

static uint64_t random_tag(void)
{
	uint64_t tag = 0;
	FILE *f = fopen("/dev/urandom", "rb");

	if (!f || fread(&tag, sizeof(tag), 1, f) != 1)
		tag = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	if (f)
		fclose(f);
	return tag;
}

/* Puts data under prefix in chunks of chunk_bytes (keys prefix %08x i): their number. */
static int write_chunks(const struct st_etcd *se, struct etcd_client *c, const char *prefix,
			const void *data, size_t len, size_t *n_chunks)
{
	int rc = 0;

	*n_chunks = (len + se->chunk_bytes - 1) / se->chunk_bytes;
	for (size_t i = 0; rc == 0 && i < *n_chunks; i++) {
		char key[720];
		size_t off = i * se->chunk_bytes;
		size_t n = len - off < se->chunk_bytes ? len - off : se->chunk_bytes;

		snprintf(key, sizeof(key), "%s%08zx", prefix, i);
		rc = etcd_put(c, key, strlen(key), (const uint8_t *)data + off, n, 0, NULL);
	}
	return rc;
}

/* Deletes the chunks under prefix, as far as etcd answers (orphans otherwise: invariant 5). */
static void drop_chunks(struct etcd_client *c, const char *prefix)
{
	size_t end_len;
	uint8_t *end = etcd_prefix_end(prefix, strlen(prefix), &end_len);

	if (end)
		(void)etcd_delete(c, prefix, strlen(prefix), end, end_len, NULL);
	free(end);
}

/*
 * Publishes payload (a changeset, deflated or not) as entry seq + 1: one
 * fenced transaction puts it and the head. An entry larger than
 * chunk_bytes is staged in chunks first and what the log holds is their
 * record (invariant 5).
 */
static int publish_entry(struct st_etcd *se, const void *payload, size_t len)
{
	char key[700], head[32], record[CHUNKED_MAX + 1], chunks[700] = "";
	const void *entry = payload;
	size_t entry_len = len;
	struct etcd_cmp cmps[2];
	size_t n_cmps = write_cmps(se, cmps);
	struct etcd_op ops[2];
	bool succeeded;
	int64_t rev;
	int rc;

	if (len > se->chunk_bytes) {
		uint64_t tag = random_tag();
		size_t n_chunks;

		entry_chunks(se, se->seq + 1, tag, chunks, sizeof(chunks));
		rc = write_chunks(se, se->c, chunks, payload, len, &n_chunks);
		if (rc) { /* the log is untouched: nothing was written */
			rc = etcd_failed(se, "staging a large entry's chunks", rc);
			drop_chunks(se->c, chunks); /* after the error is kept: it may fail too */
			return rc;
		}
		snprintf(record, sizeof(record), CHUNKED_RECORD "%zu %zu %" PRIx64, n_chunks, len,
			 tag);
		entry = record;
		entry_len = strlen(record);
	}
	log_key(se, se->seq + 1, key, sizeof(key));
	snprintf(head, sizeof(head), "%" PRIu64, se->seq + 1);
	ops[0] = (struct etcd_op){.kind = ETCD_OP_PUT,
				  .key = key,
				  .key_len = strlen(key),
				  .value = entry,
				  .value_len = entry_len};
	ops[1] = (struct etcd_op){.kind = ETCD_OP_PUT,
				  .key = se->head_key,
				  .key_len = strlen(se->head_key),
				  .value = head,
				  .value_len = strlen(head)};
	rc = etcd_txn(se->c, cmps, n_cmps, ops, 2, NULL, 0, &succeeded, &rev);
	/* etcd's UNAVAILABLE and timeouts do not say whether the entry went in */
	if (rc)
		return publish_unknown(se, key, entry, entry_len, rc);
	if (!succeeded) {
		rc = publish_refused(se, key, entry, entry_len);
		if ((rc == -EBUSY || rc == -EPERM) && chunks[0])
			drop_chunks(se->c, chunks); /* refused for sure: never visible */
		return rc;
	}
	se->seq++;
	se->head_rev = rev;
	se->rev_seen = rev;
	return 0;
}

static int publish(void *ctx, const void *changeset, size_t len)
{
	uint8_t *z = NULL;
	size_t z_len = 0;
	int rc = deflate_changeset(changeset, len, &z, &z_len);

	if (rc == 0)
		rc = publish_entry(ctx, z ? z : changeset, z ? z_len : len);
	free(z);
	return rc;
}

/*
 * The chunk prefix of the snapshot recorded in etcd (old: "" when none), its
 * seq (*snap_seq unless NULL, 0 when none) and the record's mod revision
 * (*mod_rev unless NULL, 0 when none).
 * Chunks carry a random tag beside the seq: two replicas that both write a
 * snapshot of the same seq (a deposed leader and its successor) never mix
 * their chunks, since only the tag the switch records is ever read.
 */
static int current_snapshot(struct st_etcd *se, char *old, size_t len, uint64_t *snap_seq,
			    int64_t *mod_rev)
{
	struct etcd_kvs r;
	unsigned long long seq, chunks, bytes, tag;
	int rc = etcd_range(se->c, se->snap_key, strlen(se->snap_key), NULL, 0, 0, 0, &r);

	if (rc)
		return etcd_failed(se, "reading the snapshot", rc);
	old[0] = 0;
	if (snap_seq)
		*snap_seq = 0;
	if (mod_rev)
		*mod_rev = r.n == 1 ? r.kvs[0].mod_revision : 0;
	if (r.n == 1 && sscanf((const char *)r.kvs[0].value, "%llu %llu %llu %llx", &seq, &chunks,
			       &bytes, &tag) == 4) {
		snprintf(old, len, "%s%016llx-%016llx/", se->snap_prefix, seq, tag);
		if (snap_seq)
			*snap_seq = seq;
	}
	etcd_kvs_clear(&r);
	return 0;
}

/* A snapshot being written by its thread (see the top of the file). */
struct snap_job {
	const struct st_etcd *se; /* its keys and chunk_bytes only */
	struct etcd_client *c;	  /* the thread's own */
	pthread_t thread;
	void *image; /* sqlite3_serialize image, freed by the thread */
	size_t len;
	uint64_t seq, tag;
	uint64_t keep;	  /* the first log entry the switch leaves (invariant 4) */
	int64_t snap_rev; /* the snapshot record's mod revision at the image (0: none) */
	char old_prefix[700];
	uint8_t *fence_key; /* a copy; NULL: not fenced */
	size_t fence_key_len;
	int64_t fence_rev;
	/* the outcome, set by the thread before `ended` */
	int rc;
	char error[768];
	atomic_bool ended;
};

static void *snap_main(void *arg);

static void snap_failed(struct snap_job *j, const char *what, int rc)
{
	snprintf(j->error, sizeof(j->error), "etcd: %s: %s", what,
		 *etcd_last_error(j->c) ? etcd_last_error(j->c) : strerror(-rc));
	j->rc = rc;
}

/*
 * Takes the image of the copy (at seq, committed data only) and starts the
 * thread that writes it. old, snap_rev: the snapshot recorded now. 0, or a
 * negative code (nothing started).
 */
static int snap_start(struct st_etcd *se, const char *old, int64_t snap_rev)
{
	struct snap_job *j = calloc(1, sizeof(*j));
	char err[256];
	int rc;

	if (!j)
		return -ENOMEM;
	j->se = se;
	j->seq = se->seq;
	j->tag = random_tag();
	j->keep = se->seq > se->log_tail ? se->seq + 1 - se->log_tail : 1;
	j->snap_rev = snap_rev;
	snprintf(j->old_prefix, sizeof(j->old_prefix), "%s", old);
	j->fence_rev = se->fence_rev;
	rc = etcd_client_new(&se->eopts, &j->c, err, sizeof(err));
	if (rc == 0 && se->fence_key) {
		j->fence_key = malloc(se->fence_key_len);
		if (j->fence_key) {
			memcpy(j->fence_key, se->fence_key, se->fence_key_len);
			j->fence_key_len = se->fence_key_len;
		} else {
			rc = -ENOMEM;
		}
	}
	if (rc == 0)
		rc = st_image_save(se->st, &j->image, &j->len);
	if (rc == 0)
		rc = -pthread_create(&j->thread, NULL, snap_main, j);
	if (rc) {
		st_image_free(j->image);
		etcd_client_free(j->c);
		free(j->fence_key);
		free(j);
		return rc;
	}
	se->job = j;
	return 0;
}

/*
 * The snapshot thread: chunks first, then one switch, fenced on the leader
 * key and on the snapshot record being the one the image was taken after,
 * that records the snapshot and deletes the log entries it covers but its
 * tail, their chunks (and any orphans of those seqs: invariant 5), and the
 * previous snapshot.
 */
static void *snap_main(void *arg)
{
	struct snap_job *j = arg;
	const struct st_etcd *se = j->se;
	char meta[96], prefix[700], log_end[700], chunk_end[700];
	size_t n_chunks, old_end_len = 0;
	uint8_t *old_end = NULL;
	bool succeeded = false;
	int rc;

	snprintf(prefix, sizeof(prefix), "%s%016" PRIx64 "-%016" PRIx64 "/", se->snap_prefix,
		 j->seq, j->tag);
	rc = write_chunks(se, j->c, prefix, j->image, j->len, &n_chunks);
	st_image_free(j->image);
	j->image = NULL;
	if (rc) {
		snap_failed(j, "writing a snapshot", rc);
		drop_chunks(j->c, prefix);
		goto out;
	}
	snprintf(meta, sizeof(meta), "%" PRIu64 " %zu %zu %" PRIx64, j->seq, n_chunks, j->len,
		 j->tag);
	log_key(se, j->keep, log_end, sizeof(log_end));
	snprintf(chunk_end, sizeof(chunk_end), "%s%016" PRIx64, se->chunk_prefix, j->keep);
	if (j->old_prefix[0])
		old_end = etcd_prefix_end(j->old_prefix, strlen(j->old_prefix), &old_end_len);
	if (j->old_prefix[0] && !old_end) {
		j->rc = -ENOMEM;
		snprintf(j->error, sizeof(j->error),
			 "etcd: switching to a snapshot: out of memory");
		goto out;
	}
	struct etcd_cmp cmps[2] = {{.key = se->snap_key,
				    .key_len = strlen(se->snap_key),
				    .target = ETCD_CMP_MOD,
				    .result = ETCD_CMP_EQUAL,
				    .number = j->snap_rev},
				   {.key = j->fence_key,
				    .key_len = j->fence_key_len,
				    .target = ETCD_CMP_CREATE,
				    .result = ETCD_CMP_EQUAL,
				    .number = j->fence_rev}};
	struct etcd_op ops[4] = {
		{.kind = ETCD_OP_PUT,
		 .key = se->snap_key,
		 .key_len = strlen(se->snap_key),
		 .value = meta,
		 .value_len = strlen(meta)},
		{.kind = ETCD_OP_DELETE,
		 .key = se->log_prefix,
		 .key_len = strlen(se->log_prefix),
		 .range_end = log_end,
		 .range_end_len = strlen(log_end)},
		{.kind = ETCD_OP_DELETE,
		 .key = se->chunk_prefix,
		 .key_len = strlen(se->chunk_prefix),
		 .range_end = chunk_end,
		 .range_end_len = strlen(chunk_end)},
		{.kind = ETCD_OP_DELETE,
		 .key = j->old_prefix,
		 .key_len = strlen(j->old_prefix),
		 .range_end = old_end,
		 .range_end_len = old_end_len},
	};

	rc = etcd_txn(j->c, cmps, j->fence_key ? 2 : 1, ops, j->old_prefix[0] ? 4 : 3, NULL, 0,
		      &succeeded, NULL);
	free(old_end);
	if (rc) {
		snap_failed(j, "switching to a snapshot", rc);
	} else if (!succeeded) {
		/* not the leader any more, or another snapshot was recorded:
		 * this one's chunks were never visible */
		drop_chunks(j->c, prefix);
		j->rc = -EBUSY;
		snprintf(j->error, sizeof(j->error),
			 "etcd: snapshot %" PRIu64 " not recorded: the leader key or the "
			 "snapshot record changed meanwhile",
			 j->seq);
	}
out:
	atomic_store(&j->ended, true);
	return NULL;
}

/*
 * Joins the snapshot thread once it ended (wait: waits for it to end) and
 * takes its outcome. A failed snapshot is tried again after the next
 * snapshot_every entries (snap_seq was set to its seq when it started); its
 * error is kept as the copy's last error, as a write's would be.
 */
static void snap_reap(struct st_etcd *se, bool wait)
{
	struct snap_job *j = se->job;

	if (!j || (!wait && !atomic_load(&j->ended)))
		return;
	pthread_join(j->thread, NULL);
	if (j->rc)
		set_error(se, "%s", j->error);
	etcd_client_free(j->c);
	free(j->fence_key);
	free(j);
	se->job = NULL;
}

void st_etcd_snapshot_wait(struct st_etcd *se)
{
	snap_reap(se, true);
}

static int prepare(void *ctx)
{
	struct st_etcd *se = ctx;
	int rc = 0;

	if (se->stale)
		rc = st_etcd_sync(se);
	snap_reap(se, false);
	if (rc == 0 && !se->job && se->seq >= se->snap_seq + se->snapshot_every) {
		char old[700] = "";
		uint64_t known = 0;
		int64_t snap_rev = 0;

		/* snap_seq is the newest snapshot this copy wrote or loaded: a
		 * leader that took over from a follower's copy learns here of the
		 * ones its predecessor wrote meanwhile, rather than writing the
		 * whole image again at its first write (14 MB, 3 s on the 131k
		 * fabric: a takeover's first write waited for it) */
		if (current_snapshot(se, old, sizeof(old), &known, &snap_rev) != 0)
			known = se->seq; /* etcd did not answer: tried again later */
		if (known > se->snap_seq)
			se->snap_seq = known;
		/* a snapshot that cannot start or fails is tried again after the
		 * next snapshot_every entries */
		if (se->seq >= se->snap_seq + se->snapshot_every) {
			(void)snap_start(se, old, snap_rev);
			se->snap_seq = se->seq;
		}
	}
	return rc;
}

static void local_commit_failed(void *ctx)
{
	struct st_etcd *se = ctx;

	se->stale = true;
}

static void destroy(void *ctx)
{
	struct st_etcd *se = ctx;

	snap_reap(se, true);
	etcd_watch_free(se->watch);
	etcd_client_free(se->c);
	free((char *)se->eopts.endpoints);
	free((char *)se->eopts.ca_file);
	free((char *)se->eopts.cert_file);
	free((char *)se->eopts.key_file);
	st_image_free(se->genesis);
	free(se->fence_key);
	free(se->prefix);
	free(se);
}

static const char *last_error(void *ctx)
{
	const struct st_etcd *se = ctx;

	return se->error;
}

static const struct st_repl_hooks etcd_hooks = {
	.prepare = prepare,
	.publish = publish,
	.local_commit_failed = local_commit_failed,
	.last_error = last_error,
	.destroy = destroy,
};

/* ---- following other writers ---- */

static void on_watch(void *ctx, enum etcd_watch_status status, const struct etcd_event *evs,
		     size_t n, int64_t revision)
{
	struct st_etcd *se = ctx;
	uint64_t before = se->seq;
	bool resync = false;

	if (status == ETCD_WATCH_DOWN)
		return;
	if (status == ETCD_WATCH_COMPACTED) {
		/* the watch stopped: re-read, then watch from what was read */
		if (sync_copy(se) == 0)
			etcd_watch_resume(se->watch, se->rev_seen + 1);
		else
			etcd_watch_resume(se->watch, revision);
		goto out;
	}
	for (size_t i = 0; i < n && !resync; i++) {
		uint64_t seq = log_seq(se, evs[i].kv.key, evs[i].kv.key_len);

		if (evs[i].is_delete || seq == 0 || seq <= se->seq)
			continue; /* pruned entries; our own writes */
		if (seq != se->seq + 1 || apply_entry(se, seq, &evs[i].kv, 0) != 0)
			resync = true;
	}
	if (resync && sync_copy(se) != 0)
		se->stale = true;
	if (!se->stale && revision > se->rev_seen)
		se->rev_seen = revision;
out:
	if (se->seq != before && se->on_change)
		se->on_change(se->on_change_ctx);
}

int st_etcd_follow(struct st_etcd *se, struct event_base *base, void (*on_change)(void *ctx),
		   void *ctx)
{
	uint8_t *end;
	size_t end_len;
	int rc;

	etcd_watch_free(se->watch);
	se->watch = NULL;
	se->on_change = on_change;
	se->on_change_ctx = ctx;
	end = etcd_prefix_end(se->log_prefix, strlen(se->log_prefix), &end_len);
	if (!end)
		return -ENOMEM;
	rc = etcd_watch_new(se->c, base, se->log_prefix, strlen(se->log_prefix), end, end_len,
			    se->rev_seen + 1, on_watch, se, &se->watch);
	free(end);
	return rc;
}

void st_etcd_unfollow(struct st_etcd *se)
{
	etcd_watch_free(se->watch);
	se->watch = NULL;
	se->on_change = NULL;
	se->on_change_ctx = NULL;
}

bool st_etcd_stale(const struct st_etcd *se)
{
	return se->stale;
}

int st_etcd_set_fence(struct st_etcd *se, const void *key, size_t key_len, int64_t create_revision)
{
	uint8_t *copy = NULL;

	if (key) {
		copy = malloc(key_len ? key_len : 1);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, key, key_len);
	}
	free(se->fence_key);
	se->fence_key = copy;
	se->fence_key_len = key_len;
	se->fence_rev = create_revision;
	return 0;
}

/* ---- opening ---- */

int st_etcd_open(const struct st_etcd_opts *opts, struct st_store **st_out, struct st_etcd **se_out,
		 char *err, size_t err_len)
{
	struct st_etcd *se = calloc(1, sizeof(*se));
	struct st_store *st = NULL;
	size_t plen = opts->prefix ? strlen(opts->prefix) : 0;
	int rc;

	*st_out = NULL;
	*se_out = NULL;
	if (!se)
		return -ENOMEM;
	if (plen == 0 || opts->prefix[plen - 1] != '/' || plen > 500) {
		snprintf(err, err_len, "--etcd-prefix: '%s' must end with '/' (at most 500 bytes)",
			 opts->prefix ? opts->prefix : "");
		free(se);
		return -EINVAL;
	}
	se->prefix = strdup(opts->prefix);
	snprintf(se->head_key, sizeof(se->head_key), "%shead", opts->prefix);
	snprintf(se->snap_key, sizeof(se->snap_key), "%ssnap", opts->prefix);
	snprintf(se->log_prefix, sizeof(se->log_prefix), "%slog/", opts->prefix);
	snprintf(se->snap_prefix, sizeof(se->snap_prefix), "%ssnap/", opts->prefix);
	snprintf(se->chunk_prefix, sizeof(se->chunk_prefix), "%schunk/", opts->prefix);
	se->snapshot_every = opts->snapshot_every ? opts->snapshot_every : ST_ETCD_SNAPSHOT_EVERY;
	se->log_tail = se->snapshot_every / 2 < ST_ETCD_LOG_TAIL ? se->snapshot_every / 2
								 : ST_ETCD_LOG_TAIL;
	se->chunk_bytes = opts->chunk_bytes ? opts->chunk_bytes : ST_ETCD_CHUNK_BYTES;
	se->eopts = opts->etcd;
	se->eopts.endpoints = opts->etcd.endpoints ? strdup(opts->etcd.endpoints) : NULL;
	se->eopts.ca_file = opts->etcd.ca_file ? strdup(opts->etcd.ca_file) : NULL;
	se->eopts.cert_file = opts->etcd.cert_file ? strdup(opts->etcd.cert_file) : NULL;
	se->eopts.key_file = opts->etcd.key_file ? strdup(opts->etcd.key_file) : NULL;
	if (!se->prefix || (opts->etcd.endpoints && !se->eopts.endpoints) ||
	    (opts->etcd.ca_file && !se->eopts.ca_file) ||
	    (opts->etcd.cert_file && !se->eopts.cert_file) ||
	    (opts->etcd.key_file && !se->eopts.key_file)) {
		destroy(se);
		return -ENOMEM;
	}
	rc = etcd_client_new(&opts->etcd, &se->c, err, err_len);
	if (rc == 0)
		rc = st_open_memory(&st, err, err_len);
	if (rc == 0)
		rc = st_image_save(st, &se->genesis, &se->genesis_len);
	if (rc) {
		st_close(st);
		destroy(se);
		return rc;
	}
	se->st = st;
	st_set_repl(st, &etcd_hooks, se); /* st owns se from here */
	rc = sync_copy(se);
	if (rc == -EIO && opts->offline_ok) {
		/* an empty copy, caught up by st_etcd_sync once etcd answers */
		se->stale = true;
		rc = 0;
	}
	if (rc) {
		snprintf(err, err_len, "%s", se->error);
		st_close(st);
		return rc;
	}
	*st_out = st;
	*se_out = se;
	return 0;
}
