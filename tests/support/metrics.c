/* metrics.c — reading one sample from a coordinator's /metrics (harness.h). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

double h_metric(int port, const char *series) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect to /metrics");
  const char req[] = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  cr_assert_eq(write(fd, req, sizeof req - 1), (ssize_t)(sizeof req - 1));
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  ssize_t r;
  while ((r = read(fd, buf + len, cap - 1 - len)) > 0) {
    len += (size_t)r;
    if (len + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  close(fd);
  buf[len] = '\0';
  double found = -1;
  size_t sl = strlen(series);
  for (char *line = strstr(buf, "\r\n\r\n"); line && *line;) {
    line += strspn(line, "\r\n");
    if (strncmp(line, series, sl) == 0 && line[sl] == ' ') found = strtod(line + sl + 1, NULL);
    line = strchr(line, '\n');
  }
  free(buf);
  return found;
}
