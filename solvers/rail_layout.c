/*
 * rail_layout.c - implementation of rail_layout.h: a rail-OCS fabric's
 * devices as the groups of a straight-wired leaf-spine fabric.
 */
#include "rail_layout.h"

void rail_layout_devices(const struct ocs_rail_fabric *r, struct ocs_fabric *out)
{
	*out = (struct ocs_fabric){.pods = ocs_rail_device_ports(r),
				   .k_leaf = ocs_rail_groups(r),
				   .k_spine = 1,
				   .tau = 1,
				   .k_ocs = ocs_rail_device_ports(r),
				   .wiring = OCS_WIRING_STRAIGHT};
}
