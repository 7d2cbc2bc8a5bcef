/*
 * devsim_server.c - ocs-devsim's sessions and threads (devsim_server.h).
 *
 * Threads: acceptors accept sessions and hand each one to the workers,
 * which sleep in epoll_wait(2) on the sessions' sockets and run the RPC
 * callback (see "Workers"); one timer thread reverts expired confirmed
 * commits and adds acceptors (see "Acceptors"). Every thread gets the
 * server through its start argument; the RPC callback, which libnetconf2
 * calls without one, gets its device and socket from the session's data,
 * and the server (for the reply faults of devsim_wire.h) from a
 * thread-local.
 *
 * Locks: conns_mu guards the list of live sessions, bind_mu the table of
 * bound sockets; neither is held while a device mutex (devsim_fleet.h) is
 * taken, nor together.
 */
#include "devsim_server.h"

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ACCEPT_THREADS	   4   /* acceptors at start */
#define ACCEPT_THREADS_MAX 256 /* acceptors at most (see "Acceptors") */
#define ACCEPT_POLL_MS	   200 /* how often an idle acceptor looks at stop */
#define ACCEPT_STUCK_MS	   500 /* an acceptor in nc_accept this long is in a handshake */
#define WORKER_POLL_MS	   100 /* how often an idle worker looks at stop */
#define TIMER_TICK_US	   10000
#define MAX_FDS		   65536

/* A session's data (nc_session_set_data): the device it is bound to. Freed with the session. */
struct session_data {
	struct devsim_server *srv;
	struct devsim_device *dev;
	int dev_index;
	int fd; /* the session's socket */
};

struct conn;

/* One accept thread; since_ms is when its nc_accept call began, 0 outside one. */
struct acceptor {
	struct devsim_server *srv;
	pthread_t tid;
	atomic_llong since_ms;
};

struct devsim_server {
	struct devsim_fleet *fleet; /* borrowed */
	uint16_t base_port;	    /* device I listens on base_port + I */
	int n_workers;
	bool trace; /* DEVSIM_TRACE: log session ends and refusals to stderr */
	atomic_bool stop;
	int epfd; /* epoll set of the sessions' sockets (see "Workers"); -1 before start */
	/* the threads running, so that stop joins exactly those */
	pthread_t *workers;
	int workers_running;
	pthread_t timer;
	bool timer_running;
	struct acceptor acceptors[ACCEPT_THREADS_MAX];
	int acceptors_running;	  /* written by devsim_server_start, then the timer only */
	pthread_mutex_t conns_mu; /* guards the links of conns */
	struct conn *conns;	  /* every live session, for the final clean-up */
	pthread_mutex_t bind_mu;  /* guards fd_bound */
	bool fd_bound[MAX_FDS];	  /* sockets already bound to a live session */
};

/* ---- binding a session to its device ------------------------------------- */

/*
 * libnetconf2 does not say which endpoint accepted a session. Find the
 * socket whose peer is the session's remote address among our own file
 * descriptors; its local port names the device. One client port may talk
 * to several of our ports at once (Linux reuses an ephemeral port for
 * different destinations), so sockets of live sessions are skipped and the
 * search runs under bind_mu. That is not enough: while another connection
 * from the same client port is still in its handshake (accepted by another
 * accept thread, not bound yet) its socket matches too, and picking it
 * would attach this session to the wrong device, so that every edit of the
 * session lands there (a circuit committed "on" one device missing from it,
 * found on another). When the unbound sockets of that peer port lead to
 * more than one device the session is refused (-EAGAIN; the client
 * reconnects) rather than guessed. Sockets leave fd_bound only once closed
 * (release_session), so a closing session's socket never matches either.
 */
static int bind_session_locked(struct devsim_server *srv, struct nc_session *s,
			       struct session_data *sd)
{
	uint16_t peer_port = nc_session_get_port(s);
	int count = devsim_fleet_count(srv->fleet);
	DIR *dir = opendir("/proc/self/fd");
	if (!dir)
		return -errno;
	struct dirent *de;
	int rc = -ENOENT;
	while ((de = readdir(dir))) {
		int fd = atoi(de->d_name);
		struct sockaddr_storage peer, local;
		socklen_t pl = sizeof(peer), ll = sizeof(local);
		if (de->d_name[0] == '.' || getpeername(fd, (struct sockaddr *)&peer, &pl))
			continue;
		uint16_t pp = peer.ss_family == AF_INET
				      ? ntohs(((struct sockaddr_in *)&peer)->sin_port)
				      : ntohs(((struct sockaddr_in6 *)&peer)->sin6_port);
		if (pp != peer_port || getsockname(fd, (struct sockaddr *)&local, &ll))
			continue;
		uint16_t lp = local.ss_family == AF_INET
				      ? ntohs(((struct sockaddr_in *)&local)->sin_port)
				      : ntohs(((struct sockaddr_in6 *)&local)->sin6_port);
		if (lp < srv->base_port || lp >= srv->base_port + count || fd >= MAX_FDS ||
		    srv->fd_bound[fd])
			continue;
		if (rc == 0 && sd->dev_index != lp - srv->base_port) {
			rc = -EAGAIN; /* two devices: cannot tell which one is ours */
			break;
		}
		sd->dev_index = lp - srv->base_port;
		sd->dev = devsim_fleet_device(srv->fleet, sd->dev_index);
		sd->fd = fd;
		rc = 0;
	}
	closedir(dir);
	if (rc == 0)
		srv->fd_bound[sd->fd] = true;
	return rc;
}

static int bind_session(struct devsim_server *srv, struct nc_session *s, struct session_data *sd)
{
	pthread_mutex_lock(&srv->bind_mu);
	int rc = bind_session_locked(srv, s, sd);
	pthread_mutex_unlock(&srv->bind_mu);
	return rc;
}

/*
 * Frees session s (closing its socket) and only then marks the socket
 * unbound, both under bind_mu: an fd number is free for binding again only
 * once it no longer names this session's connection. sd (NULL for a session
 * that was never bound) is freed with s.
 */
static void release_session(struct devsim_server *srv, struct nc_session *s,
			    struct session_data *sd)
{
	pthread_mutex_lock(&srv->bind_mu);
	int fd = sd && sd->dev ? sd->fd : -1;
	nc_session_free(s, NULL);
	free(sd);
	if (fd >= 0 && fd < MAX_FDS)
		srv->fd_bound[fd] = false;
	pthread_mutex_unlock(&srv->bind_mu);
}

/* A session ended: its device releases what the session held. */
static void session_gone(struct devsim_server *srv, struct nc_session *s)
{
	struct session_data *sd = nc_session_get_data(s);
	if (!sd)
		return;
	if (srv->trace)
		fprintf(stderr, "devsim: device %d session %u ended\n", sd->dev_index,
			nc_session_get_id(s));
	devsim_fleet_session_ended(sd->dev, s);
}

/* The server of this thread (workers, acceptors), for rpc_clb. */
static _Thread_local struct devsim_server *tl_srv;

/*
 * Workers. nc_ps_poll() with a timeout waits by checking every session of
 * its pollsession in a sleep loop, which made an idle simulator of 256
 * devices burn most of a core (stolen from the controller under test on a
 * small machine). So the workers sleep in epoll_wait(2) on the sessions'
 * sockets, registered one-shot: the kernel hands a readable session to one
 * worker, which asks libnetconf2 (a one-session pollsession, timeout 0) to
 * serve it until nothing is buffered, then re-arms it. A hung RPC (fault
 * knob) blocks one worker and one device only. An accepted session is served
 * once by its accept thread before it is registered: its first RPC may have
 * been read along with its <hello>, and the socket will not tell.
 */
struct conn {
	struct nc_session *s;
	struct nc_pollsession *ps; /* this session only */
	int fd;
	struct conn *prev, *next; /* srv->conns */
};

static struct nc_server_reply *reply_error(struct nc_session *session, NC_ERR tag, const char *msg)
{
	struct lyd_node *e = tag == NC_ERR_INVALID_VALUE
				     ? nc_err(nc_session_get_ctx(session), tag, NC_ERR_TYPE_PROT)
				     : nc_err(nc_session_get_ctx(session), tag, NC_ERR_TYPE_APP);
	nc_err_set_msg(e, msg, "en");
	return nc_server_reply_err(e);
}

/*
 * <kill-session> (RFC 6241 7.9) on a session of device sd->dev: another
 * session of the same device (each device is a server of its own) ends.
 * Its socket is shut down at once, so it can send nothing more and its
 * worker ends it (end_conn) as soon as it is free, and the device releases
 * its locks and reverts its unconfirmed commit before the <ok/>, as the
 * RFC requires. conns_mu is released before the device mutex is taken.
 */
static struct nc_server_reply *kill_session(struct session_data *sd, const struct lyd_node *rpc,
					    struct nc_session *session)
{
	struct devsim_server *srv = sd->srv;
	struct lyd_node *n = NULL;
	uint32_t sid = 0;
	bool found = false;

	if (!lyd_find_path(rpc, "session-id", 0, &n))
		sid = (uint32_t)strtoul(lyd_get_value(n), NULL, 10);
	if (!sid || sid == nc_session_get_id(session))
		return reply_error(session, NC_ERR_INVALID_VALUE,
				   "kill-session: not another session's id");
	pthread_mutex_lock(&srv->conns_mu);
	for (struct conn *c = srv->conns; c && !found; c = c->next) {
		struct session_data *o = nc_session_get_data(c->s);
		if (o && o->dev == sd->dev && nc_session_get_id(c->s) == sid) {
			shutdown(c->fd, SHUT_RDWR);
			found = true;
		}
	}
	pthread_mutex_unlock(&srv->conns_mu);
	if (!found)
		return reply_error(session, NC_ERR_INVALID_VALUE,
				   "kill-session: no such session on this device");
	devsim_fleet_session_killed(sd->dev, sid);
	if (srv->trace)
		fprintf(stderr, "devsim: device %d session %u killed by session %u\n",
			sd->dev_index, sid, nc_session_get_id(session));
	return nc_server_reply_ok();
}

/* libnetconf2's RPC callback (process-global, no user data: see the header). */
static struct nc_server_reply *rpc_clb(struct lyd_node *rpc, struct nc_session *session)
{
	struct session_data *sd = nc_session_get_data(session);
	if (!sd || !sd->dev)
		return reply_error(session, NC_ERR_OP_FAILED, "session is not bound to a device");
	if (!strcmp(LYD_NAME(rpc), "kill-session"))
		return kill_session(sd, rpc, session);
	struct devsim_wire_fault wire;
	struct nc_server_reply *reply = devsim_fleet_rpc(sd->dev, rpc, session, sd->fd, &wire);
	/* libnetconf2 writes the reply on this thread once we return */
	devsim_wire_arm(&wire, sd->fd, nc_session_get_version(session) == 1,
			tl_srv ? &tl_srv->stop : NULL);
	return reply;
}

static void end_conn(struct devsim_server *srv, struct conn *c)
{
	epoll_ctl(srv->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	pthread_mutex_lock(&srv->conns_mu);
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	pthread_mutex_unlock(&srv->conns_mu);
	nc_ps_del_session(c->ps, c->s);
	nc_ps_free(c->ps);
	session_gone(srv, c->s);
	release_session(srv, c->s, nc_session_get_data(c->s));
	free(c);
}

/* Serves what the session has buffered; false when the session ended. */
static bool serve_conn(struct conn *c)
{
	/* libnetconf2 writes a reply in several pieces (SSH packets or TLS
	 * records: chunk header, body, end of chunks). Corked, the replies to
	 * what the client sent leave together in one TCP segment once nothing
	 * more is buffered, and the client wakes up once instead of once per
	 * piece. A client that waits for each reply has one RPC buffered at a
	 * time; a pipelined pair is answered in one segment. */
	int on = 1, off = 0;
	setsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
	bool alive = true;
	for (;;) {
		struct nc_session *s = NULL;
		int r = nc_ps_poll(c->ps, 0, &s);
		devsim_wire_disarm(); /* the reply of that RPC, if any, is written */
		/* a reply that could not be written (the client gave up on a hung
		 * RPC) leaves the session invalid without SESSION_TERM: end it too,
		 * or its locks would outlive it */
		if ((r & (NC_PSPOLL_SESSION_TERM | NC_PSPOLL_SESSION_ERROR | NC_PSPOLL_ERROR)) ||
		    nc_session_get_status(c->s) != NC_STATUS_RUNNING) {
			alive = false;
			break;
		}
		if (!(r & NC_PSPOLL_RPC))
			break; /* nothing more buffered */
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
	return alive;
}

static void *worker_main(void *arg)
{
	struct devsim_server *srv = arg;
	tl_srv = srv;
	while (!atomic_load(&srv->stop)) {
		struct epoll_event ev;
		if (epoll_wait(srv->epfd, &ev, 1, WORKER_POLL_MS) != 1)
			continue;
		struct conn *c = ev.data.ptr;
		ev.events = EPOLLIN | EPOLLONESHOT;
		if (!serve_conn(c) || epoll_ctl(srv->epfd, EPOLL_CTL_MOD, c->fd, &ev))
			end_conn(srv, c);
	}
	nc_thread_destroy();
	return NULL;
}

/* Serves an accepted, bound session once and hands it to the workers. */
static void add_conn(struct devsim_server *srv, struct nc_session *s)
{
	struct session_data *sd = nc_session_get_data(s);
	struct conn *c = calloc(1, sizeof(*c));
	struct nc_pollsession *ps = nc_ps_new();
	if (!c || !ps || nc_ps_add_session(ps, s)) {
		free(c);
		nc_ps_free(ps);
		session_gone(srv, s);
		release_session(srv, s, sd);
		return;
	}
	*c = (struct conn){.s = s, .ps = ps, .fd = sd->fd};
	pthread_mutex_lock(&srv->conns_mu);
	c->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = c;
	srv->conns = c;
	pthread_mutex_unlock(&srv->conns_mu);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = c};
	if (!serve_conn(c) || epoll_ctl(srv->epfd, EPOLL_CTL_ADD, c->fd, &ev))
		end_conn(srv, c);
}

/* ---- acceptors ------------------------------------------------------------ */

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Acceptors. nc_accept takes a connection and does its SSH handshake in
 * the calling thread, until libnetconf2's timeouts end it (about 10 s for
 * a client that never sends its banner), so a client that stops
 * mid-handshake (a process under SIGSTOP, a dead link) holds an acceptor
 * that long. Real devices each run their own SSH server: one client stuck
 * on one device never delays another device's connects. So when every
 * acceptor has been inside nc_accept for ACCEPT_STUCK_MS (an idle one
 * returns every ACCEPT_POLL_MS), the timer thread doubles them, up to
 * ACCEPT_THREADS_MAX; they stay until stop. (One more at a time took 16 s
 * to get past 16 stuck clients: each new acceptor takes the next stuck
 * connection at once.) Without it, four such connections kept every device
 * of the fleet from starting a session for up to 10 s.
 */
static void *accept_main(void *arg)
{
	struct acceptor *a = arg;
	struct devsim_server *srv = a->srv;
	tl_srv = srv;
	while (!atomic_load(&srv->stop)) {
		struct nc_session *s = NULL;
		atomic_store(&a->since_ms, mono_ms());
		NC_MSG_TYPE m = nc_accept(ACCEPT_POLL_MS, &s);
		atomic_store(&a->since_ms, 0);
		if (m != NC_MSG_HELLO || !s)
			continue;
		struct session_data *sd = calloc(1, sizeof(*sd));
		if (sd)
			sd->srv = srv;
		if (!sd || bind_session(srv, s, sd)) {
			if (srv->trace)
				fprintf(stderr,
					"devsim: session %u refused: no single device owns its "
					"socket\n",
					nc_session_get_id(s));
			release_session(srv, s, NULL);
			free(sd);
			continue;
		}
		nc_session_set_data(s, sd);
		add_conn(srv, s);
	}
	nc_thread_destroy();
	return NULL;
}

static int start_acceptor(struct devsim_server *srv)
{
	struct acceptor *a = &srv->acceptors[srv->acceptors_running];
	a->srv = srv;
	atomic_init(&a->since_ms, 0);
	int rc = -pthread_create(&a->tid, NULL, accept_main, a);
	srv->acceptors_running += !rc;
	return rc;
}

/* The timer thread's check: twice the acceptors when all are in handshakes. */
static void add_acceptors_if_stuck(struct devsim_server *srv)
{
	int64_t now = mono_ms();
	int n = srv->acceptors_running;
	for (int i = 0; i < n; i++) {
		int64_t since = atomic_load(&srv->acceptors[i].since_ms);
		if (since == 0 || now - since < ACCEPT_STUCK_MS)
			return;
	}
	while (srv->acceptors_running < 2 * n && srv->acceptors_running < ACCEPT_THREADS_MAX &&
	       start_acceptor(srv) == 0)
		;
	if (srv->acceptors_running > n && srv->trace)
		fprintf(stderr, "devsim: every acceptor is in a handshake: %d acceptors now\n",
			srv->acceptors_running);
}

static void *timer_main(void *arg)
{
	struct devsim_server *srv = arg;
	while (!atomic_load(&srv->stop)) {
		usleep(TIMER_TICK_US);
		devsim_fleet_expire_commits(srv->fleet);
		add_acceptors_if_stuck(srv);
	}
	return NULL;
}

/* ---- lifecycle ------------------------------------------------------------ */

struct devsim_server *devsim_server_new(struct devsim_fleet *fleet, uint16_t base_port, int workers)
{
	struct devsim_server *srv = calloc(1, sizeof(*srv));
	pthread_t *tids = calloc((size_t)workers, sizeof(*tids));
	if (!srv || !tids) {
		free(srv);
		free(tids);
		return NULL;
	}
	srv->fleet = fleet;
	srv->base_port = base_port;
	srv->n_workers = workers;
	srv->workers = tids;
	srv->trace = getenv("DEVSIM_TRACE") != NULL;
	srv->epfd = -1;
	atomic_init(&srv->stop, false);
	pthread_mutex_init(&srv->conns_mu, NULL);
	pthread_mutex_init(&srv->bind_mu, NULL);
	return srv;
}

int devsim_server_start(struct devsim_server *srv)
{
	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srv->epfd < 0)
		return -errno;
	atomic_store(&srv->stop, false);
	nc_set_global_rpc_clb(rpc_clb);
	int rc = 0;
	while (!rc && srv->workers_running < srv->n_workers) {
		rc = -pthread_create(&srv->workers[srv->workers_running], NULL, worker_main, srv);
		srv->workers_running += !rc;
	}
	while (!rc && srv->acceptors_running < ACCEPT_THREADS)
		rc = start_acceptor(srv);
	/* after the acceptors: from here on the timer alone adds them */
	if (!rc) {
		rc = -pthread_create(&srv->timer, NULL, timer_main, srv);
		srv->timer_running = !rc;
	}
	if (rc)
		devsim_server_stop(srv);
	return rc;
}

void devsim_server_stop(struct devsim_server *srv)
{
	if (srv->epfd < 0)
		return;
	atomic_store(&srv->stop, true);
	/* the timer first: it adds acceptors */
	if (srv->timer_running)
		pthread_join(srv->timer, NULL);
	srv->timer_running = false;
	for (; srv->acceptors_running > 0; srv->acceptors_running--)
		pthread_join(srv->acceptors[srv->acceptors_running - 1].tid, NULL);
	for (; srv->workers_running > 0; srv->workers_running--)
		pthread_join(srv->workers[srv->workers_running - 1], NULL);
	while (srv->conns)
		end_conn(srv, srv->conns);
	close(srv->epfd);
	srv->epfd = -1;
}

void devsim_server_free(struct devsim_server *srv)
{
	if (!srv)
		return;
	devsim_server_stop(srv);
	pthread_mutex_destroy(&srv->conns_mu);
	pthread_mutex_destroy(&srv->bind_mu);
	free(srv->workers);
	free(srv);
}
