/* journal.c — the unguarded-execution journal: appending a line (idem_step_run) and replaying
 * a journal into the coordinator (idem_journal_reconcile). The line format is in idem.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "idem/v1/names.h"
#include "idem_internal.h"

#define JOURNAL_MAGIC "idem1"
#define JOURNAL_FIELDS 12

static pthread_mutex_t journal_mu = PTHREAD_MUTEX_INITIALIZER;

/* --- encoding ------------------------------------------------------------------------------- */

static bool plain(unsigned char ch) {
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
         ch == '.' || ch == '_' || ch == ':' || ch == '/' || ch == '-';
}

/* Appends the percent-encoding of v[0..n) ("-" when empty) to buf at *len (buf has room). */
static void put_enc(char *buf, size_t *len, const void *v, size_t n) {
  static const char hex[] = "0123456789ABCDEF";
  const unsigned char *p = v;
  if (n == 0) {
    buf[(*len)++] = '-';
    return;
  }
  for (size_t i = 0; i < n; i++) {
    if (plain(p[i]) && !(i == 0 && n == 1 && p[i] == '-')) {
      buf[(*len)++] = (char)p[i];
    } else {
      buf[(*len)++] = '%';
      buf[(*len)++] = hex[p[i] >> 4];
      buf[(*len)++] = hex[p[i] & 15];
    }
  }
}

static void put_str(char *buf, size_t *len, const char *s) {
  put_enc(buf, len, s ? s : "", s ? strlen(s) : 0);
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

/* Decodes a field in place; returns its length, or -1 when malformed. "-" is empty. */
static long dec_field(char *f) {
  if (strcmp(f, "-") == 0) {
    f[0] = '\0';
    return 0;
  }
  size_t o = 0;
  for (size_t i = 0; f[i]; i++) {
    if (f[i] == '%') {
      int h = hexval(f[i + 1]), l = h >= 0 ? hexval(f[i + 2]) : -1;
      if (h < 0 || l < 0) return -1;
      f[o++] = (char)(h * 16 + l);
      i += 2;
    } else {
      f[o++] = f[i];
    }
  }
  f[o] = '\0';
  return (long)o;
}

int idem__journal_append(const char *path, const char *source, const char *tenant,
                         const idem_step_key *key, const uint8_t *fp, size_t fp_len,
                         const idem_result *res, idem_error *err) {
  size_t cap = 256 + 3 * (2 * IDEM_GLOBAL_ID_MAX + 2 * IDEM_NAME_MAX + res->body_len) + 2 * fp_len;
  char *buf = malloc(cap);
  if (!buf) return idem__fail(err, IDEM_DATA_LOSS, "journal: out of memory");
  struct timeval tv;
  gettimeofday(&tv, NULL);
  size_t len = (size_t)snprintf(buf, cap, JOURNAL_MAGIC " %lld %s ",
                                (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000, source);
  put_str(buf, &len, tenant);
  buf[len++] = ' ';
  put_str(buf, &len, key->global_id);
  buf[len++] = ' ';
  put_str(buf, &len, key->service);
  buf[len++] = ' ';
  put_str(buf, &len, key->operation);
  buf[len++] = ' ';
  /* PHASE and OUTCOME in names.h's words; any other phase is written as forward, any other
   * outcome as unknown. */
  int ph = key->phase == IDEM_COMPENSATION ? IDEM_COMPENSATION : IDEM_FORWARD;
  int oc = res->outcome >= 1 && res->outcome <= 4 ? (int)res->outcome : IDEM_OUTCOME_UNKNOWN;
  len += (size_t)snprintf(buf + len, cap - len, "%s %s %d ", idem_word_phase(ph),
                          idem_word_outcome(oc), (int)res->code);
  if (fp_len == 0) buf[len++] = '-';
  for (size_t i = 0; i < fp_len; i++) len += (size_t)snprintf(buf + len, cap - len, "%02x", fp[i]);
  buf[len++] = ' ';
  put_enc(buf, &len, res->body, res->body_len);
  buf[len++] = '\n';

  int rc = IDEM_OK;
  pthread_mutex_lock(&journal_mu);
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    rc = idem__fail(err, IDEM_DATA_LOSS, "journal %s: cannot open: %s", path, strerror(errno));
  } else {
    size_t done = 0;
    while (done < len && rc == IDEM_OK) {
      ssize_t w = write(fd, buf + done, len - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        rc = idem__fail(err, IDEM_DATA_LOSS, "journal %s: cannot write: %s", path, strerror(errno));
      else
        done += (size_t)w;
    }
    if (rc == IDEM_OK && fsync(fd) != 0)
      rc = idem__fail(err, IDEM_DATA_LOSS, "journal %s: cannot sync: %s", path, strerror(errno));
    close(fd);
  }
  pthread_mutex_unlock(&journal_mu);
  free(buf);
  return rc;
}

/* --- reconcile ------------------------------------------------------------------------------ */

typedef struct jline {
  char *tenant, *global_id, *service, *operation;
  idem_phase phase;
  idem_outcome outcome;
  int32_t code;
  uint8_t fp[IDEM_FINGERPRINT_MAX];
  size_t fp_len;
  char *body;
  size_t body_len;
} jline;

/* Splits and decodes a line in place. false when malformed. */
static bool parse_line(char *line, jline *j) {
  char *f[JOURNAL_FIELDS];
  int n = 0;
  for (char *save = NULL, *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
    if (n == JOURNAL_FIELDS) return false;
    f[n++] = t;
  }
  if (n != JOURNAL_FIELDS || strcmp(f[0], JOURNAL_MAGIC) != 0) return false;
  memset(j, 0, sizeof *j);
  if (dec_field(f[3]) < 0 || dec_field(f[4]) < 1 || dec_field(f[5]) < 1 || dec_field(f[6]) < 1)
    return false;
  j->tenant = f[3];
  j->global_id = f[4];
  j->service = f[5];
  j->operation = f[6];
  int ph = idem_word_find(idem_phase_words, IDEM_WORD_COUNT(idem_phase_words), 1, f[7]);
  int oc = idem_word_find(idem_outcome_words, IDEM_WORD_COUNT(idem_outcome_words), 1, f[8]);
  if (ph < 0 || oc < 0) return false; /* the "unspecified" words (0) are not accepted */
  j->phase = (idem_phase)ph;
  j->outcome = (idem_outcome)oc;
  char *end;
  long code = strtol(f[9], &end, 10);
  if (*end) return false;
  j->code = (int32_t)code;
  if (strcmp(f[10], "-") != 0) {
    size_t hl = strlen(f[10]);
    if (hl % 2 || hl / 2 > IDEM_FINGERPRINT_MAX) return false;
    for (size_t i = 0; i < hl / 2; i++) {
      int h = hexval(f[10][2 * i]), l = hexval(f[10][2 * i + 1]);
      if (h < 0 || l < 0) return false;
      j->fp[i] = (uint8_t)(h * 16 + l);
    }
    j->fp_len = hl / 2;
  }
  long bl = dec_field(f[11]);
  if (bl < 0) return false;
  j->body = f[11];
  j->body_len = (size_t)bl;
  return true;
}

void idem_reconcile_report_clear(idem_reconcile_report *r) {
  if (!r) return;
  free(r->items);
  memset(r, 0, sizeof *r);
}

/* Counts the line and keeps an item for every status but RECORDED. */
static int note(idem_reconcile_report *rep, size_t line_no, idem_reconcile_status st,
                const jline *j, int code, const char *detail, idem_error *err) {
  switch (st) {
    case IDEM_RECONCILE_RECORDED:
      rep->recorded++;
      return IDEM_OK;
    case IDEM_RECONCILE_ALREADY_PRESENT:
      rep->already_present++;
      break;
    case IDEM_RECONCILE_RAN_TWICE:
      rep->ran_twice++;
      break;
    case IDEM_RECONCILE_SKIPPED:
      rep->skipped++;
      break;
    case IDEM_RECONCILE_INVALID:
      rep->invalid++;
      break;
    case IDEM_RECONCILE_FAILED:
      rep->failed++;
      break;
  }
  idem_reconcile_line *grown = realloc(rep->items, (rep->n_items + 1) * sizeof *grown);
  if (!grown) return idem__fail(err, IDEM_NOMEM, "out of memory");
  rep->items = grown;
  idem_reconcile_line *it = &rep->items[rep->n_items++];
  memset(it, 0, sizeof *it);
  it->line_no = line_no;
  it->status = st;
  if (j) {
    snprintf(it->global_id, sizeof it->global_id, "%s", j->global_id);
    snprintf(it->service, sizeof it->service, "%s", j->service);
    snprintf(it->operation, sizeof it->operation, "%s", j->operation);
    it->phase = j->phase;
    it->outcome = j->outcome;
  }
  it->error_code = code;
  snprintf(it->detail, sizeof it->detail, "%s", detail ? detail : "");
  return IDEM_OK;
}

/* The errors that stop a replay: the coordinator stopped answering, or memory ran out (neither
 * says anything about the line). */
static bool stops_replay(int rc) {
  return rc == IDEM_UNAVAILABLE || rc == IDEM_DEADLINE_EXCEEDED || rc == IDEM_NOMEM;
}

/* One line against the coordinator. Returns IDEM_OK (status in *st, detail filled) or the
 * error that stops the replay (stops_replay). */
static int replay(idem_client *c, const jline *j, idem_reconcile_status *st, int *code,
                  char *detail, size_t dn, idem_error *err) {
  idem_step_key key = {j->global_id, j->service, j->operation, j->phase};
  idem_begin b;
  *code = 0;
  int rc = idem_step_begin(c, &key, j->fp, j->fp_len, 0, &b, err);
  if (rc == IDEM_ABORTED || rc == IDEM_FAILED_PRECONDITION) {
    *st = IDEM_RECONCILE_RAN_TWICE;
    snprintf(detail, dn, "%s",
             rc == IDEM_ABORTED ? "running under the coordinator now"
                                : "a different request holds the key");
    return IDEM_OK;
  }
  if (rc != IDEM_OK) {
    if (stops_replay(rc)) return rc;
    *st = IDEM_RECONCILE_FAILED;
    *code = rc;
    snprintf(detail, dn, "begin: %.140s", err->message);
    return IDEM_OK;
  }
  switch (b.decision) {
    case IDEM_DECISION_PROCEED:
      break;
    case IDEM_DECISION_REPLAY: {
      const idem_result *r = &b.result;
      bool same = r->outcome == j->outcome && r->code == j->code && r->body_len == j->body_len &&
                  (j->body_len == 0 || memcmp(r->body, j->body, j->body_len) == 0);
      *st = same ? IDEM_RECONCILE_ALREADY_PRESENT : IDEM_RECONCILE_RAN_TWICE;
      snprintf(detail, dn, "%s",
               same ? "the coordinator holds the same result"
                    : "the coordinator holds a different result");
      idem_begin_clear(&b);
      return IDEM_OK;
    }
    case IDEM_DECISION_SKIP_NULL_COMPENSATION:
      *st = IDEM_RECONCILE_RECORDED; /* the coordinator now holds the compensation as done */
      idem_begin_clear(&b);
      return IDEM_OK;
    case IDEM_DECISION_SKIP_ALREADY_COMPENSATED:
      *st = IDEM_RECONCILE_RAN_TWICE;
      snprintf(detail, dn, "the step was compensated under the coordinator");
      idem_begin_clear(&b);
      return IDEM_OK;
    default: /* PROCEED_UNGUARDED: the coordinator's store is down: nothing recorded */
      idem_begin_clear(&b);
      return idem__fail(err, IDEM_UNAVAILABLE, "the coordinator's store is unavailable");
  }
  uint64_t attempt = b.attempt;
  idem_begin_clear(&b);
  rc = idem_step_complete(c, &key, attempt, j->outcome, j->code, j->body, j->body_len, NULL, err);
  if (stops_replay(rc)) return rc;
  if (rc != IDEM_OK) {
    *st = IDEM_RECONCILE_FAILED;
    *code = rc;
    snprintf(detail, dn, "complete: %.140s", err->message);
    return IDEM_OK;
  }
  *st = IDEM_RECONCILE_RECORDED;
  return IDEM_OK;
}

int idem_journal_reconcile(idem_client *c, const char *journal_path, idem_reconcile_report *rep,
                           idem_error *err) {
  idem_reconcile_report scratch;
  if (!rep) rep = &scratch;
  memset(rep, 0, sizeof *rep);
  idem__err_reset(err);
  idem_error e2;
  if (!err) err = &e2;
  if (!c) return idem__fail(err, IDEM_INVALID_ARGUMENT, "client is null");
  if (!journal_path) return idem__fail(err, IDEM_INVALID_ARGUMENT, "journal_path is null");
  FILE *f = fopen(journal_path, "re");
  if (!f)
    return idem__fail(err, IDEM_NOT_FOUND, "journal %s: cannot open: %s", journal_path,
                      strerror(errno));
  const char *tenant = idem__client_tenant(c);
  char *line = NULL;
  size_t cap = 0, line_no = 0;
  ssize_t n;
  int rc = IDEM_OK;
  while (rc == IDEM_OK && (n = getline(&line, &cap, f)) >= 0) {
    line_no++;
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
    if (n == 0) continue;
    rep->lines++;
    jline j;
    if (!parse_line(line, &j)) {
      rc = note(rep, line_no, IDEM_RECONCILE_INVALID, NULL, 0, "malformed line", err);
      continue;
    }
    if (strcmp(j.tenant, tenant) != 0) {
      rc = note(rep, line_no, IDEM_RECONCILE_SKIPPED, &j, 0, "another tenant", err);
      continue;
    }
    idem_reconcile_status st = IDEM_RECONCILE_FAILED;
    int code = 0;
    char detail[160] = "";
    rc = replay(c, &j, &st, &code, detail, sizeof detail, err);
    if (rc == IDEM_OK) rc = note(rep, line_no, st, &j, code, detail, err);
  }
  /* getline's -1 is the end of the file only at EOF: otherwise it ran out of memory or could
   * not read, and the lines after it were never seen */
  if (rc == IDEM_OK && !feof(f))
    rc = errno == ENOMEM ? idem__fail(err, IDEM_NOMEM, "out of memory")
                         : idem__fail(err, IDEM_DATA_LOSS, "journal %s: cannot read: %s",
                                      journal_path, strerror(errno));
  free(line);
  fclose(f);
  /* only a coordinator that stopped answering leaves the lines done so far in *rep */
  if (rc != IDEM_OK && rc != IDEM_UNAVAILABLE && rc != IDEM_DEADLINE_EXCEEDED)
    idem_reconcile_report_clear(rep);
  if (rc == IDEM_OK) idem__err_reset(err);
  return rc;
}
