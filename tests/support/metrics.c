/* metrics.c — HTTP on loopback (a GET, a request with a cookie and a form, a console session), and
 * one sample of a coordinator's /metrics (harness.h). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

int h_http_request(int port, const char *method, const char *path, const char *cookie,
                   const char *form, char **resp) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect to port %d", port);
  char req[4096];
  int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: localhost\r\n", method, path);
  if (cookie) n += snprintf(req + n, sizeof req - (size_t)n, "Cookie: %s\r\n", cookie);
  if (form)
    n +=
        snprintf(req + n, sizeof req - (size_t)n,
                 "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %zu\r\n\r\n%s",
                 strlen(form), form);
  else
    n += snprintf(req + n, sizeof req - (size_t)n, "\r\n");
  cr_assert_lt((size_t)n, sizeof req);
  cr_assert_eq(write(fd, req, (size_t)n), n);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  ssize_t r;
  while ((r = read(fd, buf + len, cap - 1 - len)) > 0) {
    len += (size_t)r;
    if (len + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  close(fd);
  buf[len] = '\0';
  int status = 0;
  cr_assert_eq(sscanf(buf, "HTTP/1.%*d %d", &status), 1, "%s", buf);
  *resp = buf;
  return status;
}

int h_http_get(int port, const char *path, char **body) {
  char *buf;
  int status = h_http_request(port, "GET", path, NULL, NULL, &buf);
  char *sep = strstr(buf, "\r\n\r\n");
  *body = strdup(sep ? sep + 4 : "");
  free(buf);
  return status;
}

double h_metric(int port, const char *series) {
  char *body;
  h_http_get(port, "/metrics", &body);
  double found = -1;
  size_t sl = strlen(series);
  for (char *line = body; line && *line;) {
    line += strspn(line, "\r\n");
    if (strncmp(line, series, sl) == 0 && line[sl] == ' ') found = strtod(line + sl + 1, NULL);
    line = strchr(line, '\n');
  }
  free(body);
  return found;
}

bool h_text_after(const char *s, const char *needle, const char *stop, char *out, size_t cap) {
  const char *p = strstr(s, needle);
  if (!p) return false;
  p += strlen(needle);
  size_t n = strcspn(p, stop);
  if (n >= cap) return false;
  memcpy(out, p, n);
  out[n] = '\0';
  return true;
}

void h_console_session(int port, const char *tenant, char *cookie, size_t cap) {
  char path[160], *resp = NULL, id[128];
  snprintf(path, sizeof path, "/?tenant=%s", tenant);
  cr_assert_eq(h_http_request(port, "GET", path, NULL, NULL, &resp), 200, "%s", resp);
  cr_assert(h_text_after(resp, "Set-Cookie: idem_session=", ";\r\n", id, sizeof id), "%s", resp);
  snprintf(cookie, cap, "idem_session=%s", id);
  free(resp);
}
