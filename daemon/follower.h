/*
 * follower.h - what a follower replica serves (docs/replicas.md): a
 * read-only view of the fabric built from the store copy, which follows
 * the leader's log through an etcd watch. The view (circuits, rings, rail
 * port map, device drains and the job table) is brought up to the copy
 * after each change the watch brings (coalesced, FW_REFRESH_MS): on a
 * leaf-spine fabric by reading again only the circuits and jobs the
 * change touched, else (and after a snapshot, a drain, or a table of
 * rings, faults or moves changed) rebuilt whole and handed to the API
 * (api_follow). Every job whose state changed is published as a JobEvent
 * to Events.Watch. Nothing here writes to the store or talks to a device.
 *
 * Threading: the loop thread only.
 */
#ifndef OCSD_FOLLOWER_H
#define OCSD_FOLLOWER_H

struct api;
struct devices;
struct fs_state;
struct loop;
struct ocsd_config;
struct st_etcd;
struct st_store;
struct jm;
struct rg_state;
struct rl_state;

struct fw_deps {
	const struct ocsd_config *cfg;
	struct st_store *store; /* the copy */
	struct st_etcd *se;	/* its etcd backend, followed (NULL: never refreshed) */
	struct loop *loop;
	struct api *api; /* serves the view; set before its server starts */
};

struct fw;

/*
 * Builds the first view from the copy, hands it to the API and follows
 * the copy. 0 or a negative code (logged). Caller frees with fw_free()
 * (accepts NULL) after the API's server is gone.
 */
int fw_new(const struct fw_deps *deps, struct fw **out);
void fw_free(struct fw *fw);
/* Rebuilds the view now (e.g. after the copy caught up with etcd). */
void fw_refresh(struct fw *fw);
/*
 * A takeover's start (daemon.c) reuses the view's circuits rather than
 * reading them all again (96,512 rows: 300 ms under a takeover's load).
 * fw_take_fs() brings the view up to the copy and detaches its circuits
 * (caller owns them; NULL when the view is stale or has none, e.g. not a
 * leaf-spine fabric), and leaves the store noting what it applies (the
 * leader's catch-up with etcd comes after). fw_fs_catch_up() applies those
 * notes to fs and stops the notes: 0, -EAGAIN when the change was too
 * large to note row by row (a snapshot loaded), or -errno; on failure the
 * caller loads fs whole again. fw_fs_drop() frees circuits no start took,
 * and stops the notes. All on the loop thread.
 */
struct fs_state *fw_take_fs(struct fw *fw);
int fw_fs_catch_up(struct fs_state *fs, struct st_store *st);
void fw_fs_drop(struct fs_state *fs, struct st_store *st);
/* The view's job table (for api_attach). */
struct jm *fw_jm(struct fw *fw);

/* The rest of the view, for the status page (daemon_status.c): its
 * circuits, rings, rail port map and device table (drains only: a follower
 * reads no device). A member is NULL where the fabric kind has none. Valid
 * until the next refresh; the loop thread only. */
struct fw_parts {
	struct fs_state *fs;
	struct rg_state *rings;
	struct rl_state *rl;
	struct devices *devs;
};
void fw_parts(const struct fw *fw, struct fw_parts *out);
/* Refreshes that applied the change, and that rebuilt the view, since fw_new. */
void fw_counts(const struct fw *fw, unsigned long *applied, unsigned long *rebuilt);

#endif
