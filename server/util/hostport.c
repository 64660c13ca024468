/* hostport.c — see hostport.h. */
#include "hostport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static bool digits(const char *s) {
  return *s && strspn(s, "0123456789") == strlen(s);
}

bool hostport_parse(const char *s, unsigned flags, hostport *out) {
  memset(out, 0, sizeof *out);
  if (!s) return false;
  static const struct {
    const char *prefix;
    hostport_kind kind;
  } unix_forms[] = {{"unix-abstract:", HOSTPORT_UNIX_ABSTRACT}, {"unix:", HOSTPORT_UNIX}};
  for (size_t i = 0; i < sizeof unix_forms / sizeof unix_forms[0]; i++) {
    size_t n = strlen(unix_forms[i].prefix);
    if (strncmp(s, unix_forms[i].prefix, n) != 0) continue;
    if ((flags & HOSTPORT_TCP_ONLY) || !s[n] || strlen(s + n) >= sizeof out->host) return false;
    out->kind = unix_forms[i].kind;
    memcpy(out->host, s + n, strlen(s + n) + 1);
    return true;
  }
  const char *rest;
  if (s[0] == '[') {
    const char *close = strchr(s, ']');
    if (!close || (size_t)(close - s - 1) >= sizeof out->host) return false;
    memcpy(out->host, s + 1, (size_t)(close - s - 1));
    out->v6 = true;
    rest = close + 1;
  } else {
    const char *colon = strrchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    if (n >= sizeof out->host || (colon && memchr(s, ':', n))) return false; /* bare v6 */
    memcpy(out->host, s, n);
    rest = s + n;
  }
  if (!*rest) return (flags & HOSTPORT_PORT_OPTIONAL) != 0;
  if (rest[0] != ':' || !digits(rest + 1) || strlen(rest + 1) >= sizeof out->port) return false;
  memcpy(out->port, rest + 1, strlen(rest + 1) + 1);
  return true;
}

bool hostport_format(const hostport *hp, int port, char *buf, size_t cap) {
  int n;
  switch (hp->kind) {
  case HOSTPORT_UNIX:
    n = snprintf(buf, cap, "unix:%s", hp->host);
    break;
  case HOSTPORT_UNIX_ABSTRACT:
    n = snprintf(buf, cap, "unix-abstract:%s", hp->host);
    break;
  default:
    n = snprintf(buf, cap, hp->v6 ? "[%s]:%d" : "%s:%d", hp->host, port);
  }
  return n >= 0 && (size_t)n < cap;
}

bool hostport_is_local(const hostport *hp) {
  if (hp->kind != HOSTPORT_TCP) return true;
  if (strcasecmp(hp->host, "localhost") == 0) return true;
  struct in_addr a4;
  if (!hp->v6 && inet_pton(AF_INET, hp->host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  struct in6_addr a6;
  if (hp->v6 && inet_pton(AF_INET6, hp->host, &a6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&a6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) return a6.s6_addr[12] == 127;
  }
  return false;
}

bool hostport_sockaddr(const hostport *hp, struct sockaddr_storage *ss, socklen_t *len, char *why,
                       size_t why_cap) {
  if (hp->kind != HOSTPORT_TCP) {
    snprintf(why, why_cap, "not a TCP address");
    return false;
  }
  struct addrinfo hints = {
      .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  int gai = getaddrinfo(hp->host[0] ? hp->host : NULL, hp->port, &hints, &ai);
  if (gai != 0 || !ai || ai->ai_addrlen > sizeof *ss) {
    snprintf(why, why_cap, "%s", gai ? gai_strerror(gai) : "no address");
    if (ai) freeaddrinfo(ai);
    return false;
  }
  memset(ss, 0, sizeof *ss);
  memcpy(ss, ai->ai_addr, ai->ai_addrlen);
  *len = ai->ai_addrlen;
  freeaddrinfo(ai);
  return true;
}

bool hostport_listen_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len,
                          char *why, size_t why_cap) {
  hostport hp;
  if (!hostport_parse(addr, HOSTPORT_TCP_ONLY, &hp)) {
    snprintf(why, why_cap, "expected HOST:PORT, got %s", addr ? addr : "nothing");
    return false;
  }
  char reason[128];
  if (!hostport_sockaddr(&hp, ss, len, reason, sizeof reason)) {
    snprintf(why, why_cap, "cannot resolve %s: %s", hp.host, reason);
    return false;
  }
  return true;
}
