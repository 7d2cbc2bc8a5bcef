/*
 * devsim_fault.h - the fault knobs of ocs-devsim and their text syntax,
 * shared by the --fault option and the ocs-devsim:set-faults control RPC.
 *
 * A spec is a comma-separated list of knobs:
 *   refuse@STEP        answer the RPC of STEP with an <rpc-error>
 *   drop@STEP          close the session when the RPC of STEP arrives
 *   hang@STEP=MS       sleep MS milliseconds before handling the RPC
 *   noeffect@commit    answer <ok/> to commit but change nothing (the
 *                      netconfd defect of TOOLCHAIN.md)
 *   garble@STEP        replace the reply by broken framing (NETCONF 1.1:
 *                      "\n#12abc\n<rpc-reply/>\n##\n", a chunk size that is
 *                      not a number; 1.0: a message that is not XML); the
 *                      session stays open
 *   trickle@STEP=MS    send the real reply one byte every MS milliseconds
 *   endless@STEP       instead of the reply, the chunk header
 *                      "\n#4294967295\n" and then junk, 64 bytes every 50
 *                      ms, for as long as the session is open
 *   fail-port=P        port P fails: oper-state failed, its connections
 *                      report status failed; a set-faults that sets it
 *                      sends port-state-change (P, failed), one that
 *                      clears it port-state-change (P, up)
 *   refuse-port=P      (ocs-switch) an edit-config that creates a
 *                      connection with input or output P, or points one of
 *                      P's elsewhere, is answered with an <rpc-error>
 *                      (operation-failed, naming the port and the
 *                      connection) and changes nothing; edits that leave P
 *                      alone, and removals, go through (one job's edit
 *                      refused while other jobs on the device succeed)
 *   peer-port=P:TEXT   (polatis) the fibre of ocsd port P (ingress 1+P and
 *                      egress N+1+P) reports peer-port TEXT (at most 128
 *                      characters, no comma) where running configures none:
 *                      how a test makes a miswired fibre
 *   node-fault         (ocs-transceiver) the node fails: its state says
 *                      faulty, every peer whose selected path reaches it
 *                      reports that path failed and sends loss-of-light,
 *                      and the node's agent sends node-fault (faulty=true);
 *                      a set-faults without it heals the node (node-fault
 *                      faulty=false, the peers' paths active again)
 * STEP is one of lock, unlock, edit, validate, commit (a commit that is
 * not confirming one), confirm (a commit confirming a pending confirmed
 * commit), cancel (cancel-commit), discard, get (get and get-config),
 * schema (get-schema: libnetconf2 clients send it while they connect).
 * A knob fires once (the next matching RPC) and then clears itself; a
 * trailing '+' (refuse@commit+) makes every knob of that step sticky until
 * the next set-faults (fail-port, refuse-port, peer-port and node-fault are
 * states: they hold until a set-faults without them; fail-port, refuse-port
 * and peer-port may each name up to DEVSIM_MAX_FAILED_PORTS ports). On a
 * polatis device (N x N, ingress 1..N, egress N+1..2N) every port knob
 * names ocsd's port P, the fibre on ingress 1+P and egress N+1+P:
 * fail-port=P fails ingress 1+P (the light the fibre brings in is lost;
 * port-power-alarm / port-power-clear instead of port-state-change), and
 * refuse-port=P refuses pairs touching ingress 1+P or egress N+1+P.
 * set-faults replaces all knobs; the empty spec clears them. Pure parsing,
 * no state: thread-safe.
 */
#ifndef OCS_DEVSIM_FAULT_H
#define OCS_DEVSIM_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum devsim_step {
	DEVSIM_STEP_LOCK = 0,
	DEVSIM_STEP_UNLOCK,
	DEVSIM_STEP_EDIT,
	DEVSIM_STEP_VALIDATE,
	DEVSIM_STEP_COMMIT,
	DEVSIM_STEP_CONFIRM,
	DEVSIM_STEP_CANCEL,
	DEVSIM_STEP_DISCARD,
	DEVSIM_STEP_GET,
	DEVSIM_STEP_SCHEMA,
	DEVSIM_STEP_COUNT,
};

#define DEVSIM_MAX_FAILED_PORTS 16
#define DEVSIM_PEER_PORT_LEN	128 /* optical-switch's peer-port: length 0..128 */

/* A peer-port knob: what the fibre of ocsd port `port` says it reaches. */
struct devsim_peer_port {
	int port;
	char text[DEVSIM_PEER_PORT_LEN + 1];
};

struct devsim_faults {
	uint32_t refuse_mask; /* bit per enum devsim_step */
	uint32_t drop_mask;
	uint32_t noeffect_mask;
	uint32_t garble_mask;
	uint32_t endless_mask;
	uint32_t sticky_mask; /* steps whose knobs do not clear after firing */
	int hang_ms[DEVSIM_STEP_COUNT];
	int trickle_ms[DEVSIM_STEP_COUNT]; /* 0: the reply leaves at once */
	int failed_ports[DEVSIM_MAX_FAILED_PORTS];
	int n_failed_ports;
	int refused_ports[DEVSIM_MAX_FAILED_PORTS]; /* refuse-port */
	int n_refused_ports;
	struct devsim_peer_port peer_ports[DEVSIM_MAX_FAILED_PORTS]; /* peer-port */
	int n_peer_ports;
	bool node_fault;
};

const char *devsim_step_name(enum devsim_step s);

/*
 * Parses spec into *out (cleared first). Returns 0, or -EINVAL with the
 * offending knob and the reason in err.
 */
int devsim_faults_parse(const char *spec, struct devsim_faults *out, char *err, size_t err_len);

#endif
