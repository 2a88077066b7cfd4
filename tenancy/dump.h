/*
 * dump.h — the portable dump of one tenant (`tenancy export` / `tenancy import`): its
 * registry entry, its tables' definitions and every row, as JSON lines.
 *
 * The format (version 1), UTF-8, one JSON value per line, in this order:
 *
 *   {"format":"tenancy-dump","version":1,"slug":...,"name":...,"state":...,
 *    "max_workers":N,"settings":{...},"domains":[{"domain":...,"primary":true},...],
 *    "migration_version":...,"placement":...,"backend":"sqlite"|"postgres",
 *    "exported_at":"2026-12-02T14:43:07Z","tables":[name,...]}
 *   then for each table of "tables", in that order (parents before children):
 *   {"table":name,"backend":...,"rows":N,
 *    "columns":[{"name":...,"type":...,"notnull":bool,"pk":K,"identity":bool,
 *                "boolean":bool,"default":text|null[,"custom":true]},...],
 *    "indexes":[{"name":...,"unique":bool,"columns":[...]},...]}
 *   followed by exactly N lines, one per row: [value,...] with every value a JSON string
 *   (the value's text, as copy.h reads it) or null;
 *   {"end":"tenancy-dump","tables":T,"rows":R}
 *
 * The counts make a cut or edited file fail at import instead of loading part of a tenant:
 * a table's row lines must be exactly its "rows", and the end line must be there with the
 * totals. Unknown keys are ignored (a later version may add some); a higher "version" is
 * refused. Binary values are hex text ('\x...'); a value that is not UTF-8 text fails the
 * export (JSON cannot hold it).
 *
 * Must not: touch a database or the registry (the CLI reads and writes those and hands the
 * values over), or accept a line it could only partly parse.
 */
#ifndef TN_TENANCY_DUMP_H
#define TN_TENANCY_DUMP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/arena.h"
#include "core/buf.h"
#include "storage/copy.h"

#define DUMP_FORMAT "tenancy-dump"
#define DUMP_VERSION 1

typedef struct dump_domain {
    const char *domain;
    bool primary;
} dump_domain;

typedef struct dump_header {
    int version;
    const char *slug;
    const char *name;
    const char *state;
    int max_workers;
    const char *settings;          /* a flat JSON object, as text */
    const dump_domain *domains;
    int ndomains;
    const char *migration_version;
    const char *placement;
    const char *backend;
    int64_t exported_at;           /* seconds since the epoch */
    const char *const *tables;
    int ntables;
} dump_header;

/* Writing: each appends one line (with its '\n') to b. */
void dump_put_header(buf *b, const dump_header *h);
void dump_put_table(buf *b, const copy_table *t, int64_t rows);
/* TN_OK, or TN_INVALID when a value is not UTF-8 text (nothing appended; err names the
 * column). */
int dump_put_row(buf *b, const copy_table *t, const char *const *vals, char *err,
                 size_t errlen);
void dump_put_end(buf *b, int tables, int64_t rows);

/* Reading. Every error says on which line of the file it is. */
typedef struct dump_reader dump_reader;

/* Read and check the header. TN_OK, TN_INVALID (not a dump, a later version, a bad line),
 * TN_IO, TN_NOMEM. The header lives as long as the reader. */
int dump_open(FILE *f, dump_reader **out, char *err, size_t errlen);
const dump_header *dump_header_of(const dump_reader *r);

/* The next table's definition (allocated from a) and its row count: TN_OK; TN_DONE at the end
 * line (the totals checked); TN_INVALID for anything out of order. */
int dump_next_table(dump_reader *r, arena *a, copy_table **def, int64_t *rows, char *err,
                    size_t errlen);

/* The next row of the current table: TN_OK with def->ncols values (valid until the next
 * call); TN_DONE after its last row; TN_INVALID when a line is not a row of that table. */
int dump_next_row(dump_reader *r, const char *const **vals, char *err, size_t errlen);

void dump_close(dump_reader *r);

#endif
