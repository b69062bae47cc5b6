/* warpvisor.h: the guest API of resident request handlers for `warpvisor serve`.
 *
 * A resident handler is an ordinary WASI program whose main() loops over requests instead of
 * exiting after one: its VM stays instantiated, so what it builds up serves the requests that
 * follow. Build with clang --target=wasm32-wasi (wasi-libc). See docs/serve.md.
 *
 *   #include "warpvisor.h"
 *   static int handle(const uint8_t *body, size_t len, wv_response *out) { ... return 0; }
 *   int main(void) { return wv_serve(handle); }
 */
#ifndef WARPVISOR_H
#define WARPVISOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define WV_IMPORT(name) __attribute__((import_module("warpvisor"), import_name(name)))

/* Waits for the next request: its body length, or -1 when the server stops (return then). A
 * request taken and not answered is answered 500. */
WV_IMPORT("request_next") int32_t wv_request_next(void);
/* Copies the next unread body bytes (at most len) to buf: how many, 0 at the end, -1 without
 * a request. */
WV_IMPORT("request_read") int32_t wv_request_read(uint8_t *buf, int32_t len);
/* Answers the request: 0; -1 without a request; -2 for a status outside 100-599; -3 when the
 * body is larger than the server accepts (the request is then answered 500). */
WV_IMPORT("response_send") int32_t wv_response_send(int32_t status, const uint8_t *body, int32_t len);

/* What a handler fills in: a status and a body it owns (malloc'd; wv_serve frees it). */
typedef struct {
  int32_t status;
  uint8_t *body;
  size_t len;
} wv_response;

/* The handler: the request body, and the response to fill in. Returns 0, or non-zero to have
 * the request answered 500. */
typedef int (*wv_handler)(const uint8_t *body, size_t len, wv_response *out);

/* Reads the current request's whole body into a malloc'd buffer (NULL when out of memory). */
static inline uint8_t *wv_read_body(int32_t len) {
  uint8_t *body = (uint8_t *)malloc(len > 0 ? (size_t)len : 1);
  if (!body) return NULL;
  int32_t got = 0;
  while (got < len) {
    int32_t n = wv_request_read(body + got, len - got);
    if (n <= 0) break;
    got += n;
  }
  return body;
}

/* Answers every request with `handler` until the server stops; returns 0 (main's result). */
static inline int wv_serve(wv_handler handler) {
  for (;;) {
    int32_t len = wv_request_next();
    if (len < 0) return 0;
    uint8_t *body = wv_read_body(len);
    wv_response out = {200, NULL, 0};
    static const char failed[] = "the handler failed\n";
    if (!body || handler(body, (size_t)len, &out) != 0) {
      wv_response_send(500, (const uint8_t *)failed, (int32_t)sizeof failed - 1);
    } else if (wv_response_send(out.status, out.body, (int32_t)out.len) == -2) {
      wv_response_send(500, (const uint8_t *)failed, (int32_t)sizeof failed - 1);
    }
    free(out.body);
    free(body);
  }
}

#endif /* WARPVISOR_H */
