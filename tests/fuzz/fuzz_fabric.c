/*
 * fuzz_fabric.c - libFuzzer harness: the fabric file (daemon/fabric/config.c):
 * JSON parsing and validation by libyang against ocsd-fabric.yang, then the
 * semantic checks YANG cannot express, then, for a file accepted, the
 * summary and the warnings --check-config prints (every derived size). A
 * refusal must list at least one error, each with a data path and a message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *devnull;
	struct cfg_errors errs = {0};
	struct ocsd_config *cfg = NULL;

	if (!devnull && !(devnull = fopen("/dev/null", "w")))
		abort();
	if (cfg_load_mem((const char *)data, size, &cfg, &errs) == 0) {
		cfg_print_summary(cfg, devnull);
		cfg_print_warnings(cfg, devnull);
		cfg_free(cfg);
	} else {
		if (cfg || errs.count < 1)
			abort();
		for (int i = 0; i < errs.count; i++)
			if (!errs.items[i].path || !errs.items[i].message)
				abort();
	}
	cfg_errors_clear(&errs);
	return 0;
}
