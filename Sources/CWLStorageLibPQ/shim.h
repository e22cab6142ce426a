#ifndef CWLSTORAGE_LIBPQ_SHIM_H
#define CWLSTORAGE_LIBPQ_SHIM_H

// PostgreSQL's client library, seen by the WLStoragePostgres product only.
#include <libpq-fe.h>

#endif
