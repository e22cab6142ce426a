#ifndef CWLSTORAGE_OPENSSL_SHIM_H
#define CWLSTORAGE_OPENSSL_SHIM_H

// The only C the package touches: OpenSSL's EVP interface, used for SHA-256 file names and AES-256-GCM, its random
// bytes for nonces and keys, and its error queue for the reason a call failed.
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#endif
