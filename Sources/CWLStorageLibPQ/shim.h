#ifndef CWLSTORAGE_LIBPQ_SHIM_H
#define CWLSTORAGE_LIBPQ_SHIM_H

// PostgreSQL's client library, seen by the WLStoragePostgres product (and the benchmarks' baselines) only.
#include <libpq-fe.h>

#endif
