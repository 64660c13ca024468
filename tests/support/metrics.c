/* metrics.c — an HTTP GET on loopback, and one sample of a coordinator's /metrics (harness.h). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

int h_http_get(int port, const char *path, char **body) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect to port %d", port);
  char req[256];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
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
