/* hostport.h — one parser for every address idem is given or sends: "HOST:PORT", "[V6]:PORT",
 * gRPC's "unix:PATH" and "unix-abstract:NAME" (--listen, --advertise, --metrics, --console, the
 * console's Host header, the address a standby reports). */
#ifndef IDEM_UTIL_HOSTPORT_H
#define IDEM_UTIL_HOSTPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

typedef enum hostport_kind {
  HOSTPORT_TCP = 0,
  HOSTPORT_UNIX,          /* unix:PATH */
  HOSTPORT_UNIX_ABSTRACT, /* unix-abstract:NAME */
} hostport_kind;

typedef struct hostport {
  hostport_kind kind;
  char host[256]; /* TCP: without brackets, "" = every interface; unix: the path or name */
  char port[8];   /* TCP: decimal digits; "" only with HOSTPORT_PORT_OPTIONAL */
  bool v6;        /* the host was written in brackets */
} hostport;

#define HOSTPORT_PORT_OPTIONAL 1u /* "HOST" alone is accepted (an HTTP Host header) */
#define HOSTPORT_TCP_ONLY 2u      /* unix: and unix-abstract: are refused */

/* Parses s into *out. false when s is not one of the forms above: a missing or non-numeric
 * port, an unclosed bracket, anything between "]" and ":", a host of 256 bytes or more. */
bool hostport_parse(const char *s, unsigned flags, hostport *out);

/* *hp written back with port instead of its own (TCP; ignored for unix kinds):
 * "host:port", "[v6]:port", "unix:PATH", "unix-abstract:NAME". false when cap is too small. */
bool hostport_format(const hostport *hp, int port, char *buf, size_t cap);

/* Whether hp names this machine only: a unix socket, "localhost", 127.0.0.0/8, ::1 or an
 * IPv4-mapped 127.x address. An empty host (every interface) is not local. */
bool hostport_is_local(const hostport *hp);

/* The address to bind for a TCP hp (an empty host: every interface), resolved with
 * getaddrinfo(AI_PASSIVE, numeric port) into *ss and *len. false with the resolver's reason in
 * why when it cannot be resolved (or hp is a unix socket). */
bool hostport_sockaddr(const hostport *hp, struct sockaddr_storage *ss, socklen_t *len, char *why,
                       size_t why_cap);

/* Where an HTTP endpoint listens: addr parsed as a TCP HOST:PORT and resolved (hostport_sockaddr).
 * false with why = "expected HOST:PORT, got ADDR" or "cannot resolve HOST: REASON". */
bool hostport_listen_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len,
                          char *why, size_t why_cap);

#endif
