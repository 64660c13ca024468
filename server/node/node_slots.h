/* node_slots.h — wiring: the node's slot map service (slots/slot_service.h) on the process's
 * one etcd client (elect/etcd_kv.h), or, without etcd or with --pg (one group), the equal split
 * in memory.
 */
#ifndef IDEM_NODE_SLOTS_H
#define IDEM_NODE_SLOTS_H

#include <stddef.h>

#include "../elect/etcd_kv.h"
#include "../slots/slot_service.h"
#include "options.h"

/* Starts the service for o's groups; kv NULL: in memory. *out on SLOTS_OK. */
slots_result node_slots_start(const idem_options *o, etcd_kv *kv, slot_service **out, char *msg,
                              size_t cap);

#endif
