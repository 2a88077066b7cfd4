/*
 * gen.h — the registry generation: one counter shared by every process of a host.
 *
 * A small file (state_dir/registry.gen) mapped shared by the workers, the CLI and the admin
 * panel. Whoever changes the registry commits first, then bumps the counter; each worker
 * reads it (one atomic load, no system call) when a request starts and flushes its lookup
 * cache when it moved. For a PostgreSQL registry shared by several hosts, a change is also
 * announced with NOTIFY, and each host's watcher bumps its own file.
 */
#ifndef TN_TENANCY_GEN_H
#define TN_TENANCY_GEN_H

#include <stdbool.h>
#include <stdint.h>

typedef struct gen_map gen_map;

/* Map the counter file, creating it (mode 0644) when `create` and it is missing.
 * Returns TN_OK, or TN_IO with err set. A read-only mapping suffices for readers. */
int gen_open(const char *path, bool writable, bool create, gen_map **out, char *err,
             size_t errlen);
void gen_close(gen_map *g);

uint64_t gen_read(const gen_map *g);

/* Add one; returns the new value. The mapping must be writable. */
uint64_t gen_bump(gen_map *g);

#endif
