/*
 * rail_layout.h - the device layout of a rail-OCS fabric as a leaf-spine
 * struct ocs_fabric. The devices of a rail-OCS fabric are numbered by OCS
 * group (device id = group); the daemon's circuit machinery (the circuit
 * table, the devices' runs, transactions and recovery) indexes devices
 * through a struct ocs_fabric, so this gives the fabric of that shape.
 *
 * Pure geometry: no I/O, no globals, thread-safe.
 */
#ifndef OCS_RAIL_LAYOUT_H
#define OCS_RAIL_LAYOUT_H

#include "fabric.h"

/*
 * The device layout of rail fabric r: one group per OCS group, one device
 * in each (device id = group), every device port an input and an output
 * (k_ocs = (S + A) * R). Only its device numbering means anything: the
 * circuit table, the devices' runs, transactions and recovery use that and
 * nothing else of it.
 */
void rail_layout_devices(const struct ocs_rail_fabric *r, struct ocs_fabric *out);

#endif
