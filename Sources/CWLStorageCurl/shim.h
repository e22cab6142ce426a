#ifndef CWLSTORAGE_CURL_SHIM_H
#define CWLSTORAGE_CURL_SHIM_H

// libcurl's easy interface, seen by the WLStorageEtcd product only. Its option and information calls are variadic,
// which Swift cannot call: these functions give each use a fixed signature.
#include <curl/curl.h>
#include <errno.h>
#include <sys/socket.h>

typedef size_t (*wlstorage_curl_write)(char *data, size_t size, size_t count, void *context);

static inline CURLcode wlstorage_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode wlstorage_curl_set_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode wlstorage_curl_set_size(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode wlstorage_curl_set_write(CURL *handle, wlstorage_curl_write function) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, function);
}

static inline long wlstorage_curl_status(CURL *handle) {
    long status = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

typedef int (*wlstorage_curl_progress)(
    void *context, curl_off_t downloadTotal, curl_off_t downloaded, curl_off_t uploadTotal, curl_off_t uploaded);

// Calls `function` with `context` while a transfer runs (about once a second while nothing comes): a transfer that
// never ends, as a watch's answer, is stopped by its returning non-zero.
static inline CURLcode wlstorage_curl_set_progress(CURL *handle, wlstorage_curl_progress function, void *context) {
    curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, function);
    curl_easy_setopt(handle, CURLOPT_XFERINFODATA, context);
    return curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
}

// Opens a connection's socket as libcurl would, close-on-exec, and keeps the system's reason in `*error` when it
// cannot (libcurl says only "Couldn't connect to server", also when the process has no descriptor left).
static curl_socket_t wlstorage_curl_open_socket(void *error, curlsocktype purpose, struct curl_sockaddr *address) {
    (void)purpose;
    curl_socket_t opened = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    if (opened == CURL_SOCKET_BAD && error != NULL) *(int *)error = errno;
    return opened;
}

// Makes `handle` open its sockets with `wlstorage_curl_open_socket`, the reason of a failure kept in `*error`.
static inline CURLcode wlstorage_curl_keep_socket_errors(CURL *handle, int *error) {
    curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, wlstorage_curl_open_socket);
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETDATA, (void *)error);
}

#endif
