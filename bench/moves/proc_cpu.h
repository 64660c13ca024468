/* proc_cpu.h — where the CPU went while idem-move-load ran (bench/moves): the machine's busy
 * share between two moments (/proc/stat), the CPU seconds of PostgreSQL's logical replication
 * processes (sampled: they exit with the move), and every process's CPU at a moment, to name the
 * commands whose CPU rose from one window to another. Linux /proc only; a benchmark's tool. */
#ifndef IDEM_BENCH_PROC_CPU_H
#define IDEM_BENCH_PROC_CPU_H

#include <stdio.h>

/* busy and total jiffies of the whole machine */
typedef struct cpu_mark {
  unsigned long long busy, total;
} cpu_mark;

cpu_mark cpu_now(void);
/* the busy share (0..1) of the machine from a to b */
double busy_share(cpu_mark a, cpu_mark b);

/* walsenders (decoding on the source), the subscription's apply and table sync workers */
enum { REPL_WALSENDER, REPL_WORKER, REPL_KINDS };
/* records the current CPU of every replication process (thread-safe; call often: a process's
 * last sample is what counts once it has exited) */
void repl_sample(void);
/* CPU seconds of the processes of that kind seen so far */
double repl_seconds(int kind);

#define SNAP_MAX 2048
typedef struct snap {
  int n;
  int pid[SNAP_MAX];
  unsigned long long ticks[SNAP_MAX];
  char cmd[SNAP_MAX][48]; /* command line; a PostgreSQL backend's without its activity */
} snap;

void take_snap(snap *sn);
/* prints to out the 10 commands whose CPU rate (cores) rose most from window a0..a1 (sa
 * seconds) to b0..b1 (sb seconds) */
void print_cpu_top(FILE *out, const snap *a0, const snap *a1, double sa, const snap *b0,
                   const snap *b1, double sb);

#endif
