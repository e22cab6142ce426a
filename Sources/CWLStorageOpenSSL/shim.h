#ifndef CWLSTORAGE_OPENSSL_SHIM_H
#define CWLSTORAGE_OPENSSL_SHIM_H

// The only C the package touches: OpenSSL's EVP digest interface, used for SHA-256 file names.
#include <openssl/evp.h>

#endif
