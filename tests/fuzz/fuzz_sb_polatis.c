/*
 * fuzz_sb_polatis.c - libFuzzer harness: the reply parser of the polatis
 * device model (southbound/sb_model.c over sb_reply_pairs() of
 * southbound/sb_reply.c) on arbitrary <data> content, as a Polatis switch
 * could send it. The first byte picks <get> or <get-config>, and a port map
 * (default or egress-first, 1..64 ports).
 *
 * Checks beyond "no crash, no leak, no UB": raw pairs come sorted by
 * ingress, each id in 1..65535, and whatever else the content holds
 * (port-config too) is skipped, never parsed; a parse that succeeds maps
 * every pair inside ocsd's ports (0..n-1), sorted by input, with status
 * CONNECTED after a <get> (the model has no status per pair) and UNKNOWN
 * after a <get-config>, one entry per raw pair; a refusal says why and
 * returns nothing; empty results come as NULL. The same input also goes
 * through the product and port reader (sb_device_read_info's parser, the
 * only reader of port-config): ports inside the map, sorted by (port,
 * egress), strings terminated.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sb_model.h"
#include "sb_reply.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
static void info(const char *s, size_t len, const struct sb_port_map *pm);

/* The scanner alone: sorted, ids in range; how many pairs (-1 refused). */
static long raw(const char *d, size_t len)
{
	struct sb_pair *p = NULL;
	size_t n = 0;
	int rc = sb_reply_pairs(d, len, &p, &n);
	if ((n == 0) != (p == NULL) || (rc && n))
		abort();
	for (size_t i = 0; i < n; i++)
		if (!p[i].ingress || p[i].ingress > 65535 || !p[i].egress || p[i].egress > 65535 ||
		    (i && p[i - 1].ingress >= p[i].ingress))
			abort();
	free(p);
	return rc ? -1 : (long)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const char *s = (const char *)data + 1;
	size_t len = size - 1;
	bool with_state = data[0] & 1;
	uint32_t ports = 1 + ((data[0] >> 2) & 63);
	struct sb_port_map pm = sb_model_default_ports(SB_MODEL_POLATIS, ports);
	if (data[0] & 2)
		pm = (struct sb_port_map){.in_first = ports + 1, .out_first = 1, .n = ports};
	info(s, len, &pm);
	long n_raw = raw(s, len); /* <get> or not, port-config is skipped */
	struct sb_xc_state *x = NULL;
	size_t n = 0;
	char why[160] = "";
	int rc = sb_model(SB_MODEL_POLATIS)
			 ->xc_parse(s, len, &pm, with_state, &x, &n, why, sizeof(why));
	if ((n == 0) != (x == NULL))
		abort();
	if (rc) {
		if (n || !why[0] || !memchr(why, '\0', sizeof(why)))
			abort();
		return 0;
	}
	if (n_raw < 0 || (size_t)n_raw != n)
		abort();
	for (size_t i = 0; i < n; i++) {
		if (x[i].in >= ports || x[i].out >= ports || (i && x[i - 1].in > x[i].in))
			abort();
		if (x[i].status != (with_state ? SB_XC_STATUS_CONNECTED : SB_XC_STATUS_UNKNOWN))
			abort();
	}
	free(x);
	return 0;
}

/* The product and port reader: ports inside the map, sorted by (port, egress). */
static void info(const char *s, size_t len, const struct sb_port_map *pm)
{
	struct sb_device_info in;
	char why[160] = "";
	int rc = sb_model(SB_MODEL_POLATIS)->info_parse(s, len, pm, &in, why, sizeof(why));
	if ((in.n_ports == 0) != (in.ports == NULL) || (rc && (in.n_ports || !why[0])))
		abort();
	for (size_t i = 0; i < in.n_ports; i++)
		if (in.ports[i].port >= pm->n || !memchr(in.ports[i].peer, '\0', SB_PEER_MAX + 1) ||
		    (i && (in.ports[i - 1].port > in.ports[i].port ||
			   (in.ports[i - 1].port == in.ports[i].port &&
			    in.ports[i - 1].egress >= in.ports[i].egress))))
			abort();
	if (!memchr(in.product.model, '\0', sizeof(in.product.model)))
		abort();
	free(in.ports);
}
