/* A resident handler in C on warpvisor.h: answers each request with its body upper-cased,
 * numbered by how many requests this VM has answered (the count lives on with the VM).
 * Built by guests/build.sh: guests/wasm/resident-echo_c.wasm. */
#include <stdio.h>
#include <string.h>

#include "../sdk/c/warpvisor.h"

static unsigned long answered;

static int handle(const uint8_t *body, size_t len, wv_response *out) {
  if (len == 0) {
    static const char msg[] = "send a body\n";
    out->status = 400;
    out->body = (uint8_t *)malloc(sizeof msg - 1);
    if (!out->body) return 1;
    memcpy(out->body, msg, sizeof msg - 1);
    out->len = sizeof msg - 1;
    return 0;
  }
  answered++;
  char prefix[32];
  int n = snprintf(prefix, sizeof prefix, "%lu: ", answered);
  out->body = (uint8_t *)malloc((size_t)n + len);
  if (!out->body) return 1;
  memcpy(out->body, prefix, (size_t)n);
  for (size_t i = 0; i < len; i++) {
    uint8_t c = body[i];
    out->body[n + i] = (c >= 'a' && c <= 'z') ? (uint8_t)(c - 'a' + 'A') : c;
  }
  out->len = (size_t)n + len;
  return 0;
}

int main(void) { return wv_serve(handle); }
