package dev.idem.saga.payment;

import java.util.concurrent.ThreadLocalRandom;

/**
 * The command line of saga-examples/common/sx_svc.c in Java: the same flags, each also from
 * SAGA_FLAG in the environment (the flag wins), the same defaults, the same refusals (usage on
 * stderr, exit 2), and the crash points for fault injection (SIGKILL of this process).
 */
final class Opts {
  static final String PROG = "saga-payment-java";
  static final String[][] FLAGS = {
    {"--listen", "SAGA_LISTEN"}, {"--pg", "SAGA_PG"}, {"--schema", "SAGA_SCHEMA"},
    {"--coordinator", "SAGA_COORDINATOR"}, {"--tenant", "SAGA_TENANT"},
    {"--payments", "SAGA_PAYMENTS"}, {"--inventory", "SAGA_INVENTORY"}, {"--stock", "SAGA_STOCK"},
    {"--threads", "SAGA_THREADS"}, {"--lease-ms", "SAGA_LEASE_MS"}, {"--crash", "SAGA_CRASH"},
    {"--crash-rate", "SAGA_CRASH_RATE"}, {"--step-deadline-ms", "SAGA_STEP_DEADLINE_MS"},
    {"--call-deadline-ms", "SAGA_CALL_DEADLINE_MS"},
  };
  static final String[] POINTS = {"after_begin", "after_write", "after_complete"};
  static final int AFTER_BEGIN = 0, AFTER_WRITE = 1, AFTER_COMPLETE = 2;

  String listen = "", pg = "", schema = "", coordinator = "", tenant = "shop";
  int threads = 8;
  long leaseMs, stepDeadlineMs = 10000, callDeadlineMs = 20000;
  int crashPoint = -1;
  String crashOperation = "";
  double crashRate;

  static void usage(String bad) {
    if (bad != null) System.err.println(PROG + ": " + bad);
    System.err.println("usage: " + PROG + " --listen ADDR --pg URL --schema NAME --coordinator ADDR [--tenant T]\n"
        + "       [--threads N] [--lease-ms N] [--step-deadline-ms N] [--call-deadline-ms N]\n"
        + "       [--payments ADDR --inventory ADDR] [--stock sku=N,...]\n"
        + "       [--crash after_begin|after_write|after_complete[:OPERATION]] [--crash-rate P]");
    System.exit(2);
  }

  static long num(String flag, String v, long lo, long hi) {
    try {
      long n = Long.parseLong(v);
      if (n >= lo && n <= hi) return n;
    } catch (NumberFormatException e) {
      // below
    }
    usage(flag + ": not a number in [" + lo + ", " + hi + "]: " + v);
    return 0;
  }

  void apply(int i, String v) {
    switch (i) {
      case 0 -> listen = v;
      case 1 -> pg = v;
      case 2 -> schema = v;
      case 3 -> coordinator = v;
      case 4 -> tenant = v;
      case 5, 6, 7 -> { } // accepted for the shared flag set; unused here
      case 8 -> threads = (int) num(FLAGS[i][0], v, 1, 256);
      case 9 -> leaseMs = num(FLAGS[i][0], v, 0, 3600000);
      case 10 -> {
        int c = v.indexOf(':');
        String p = c >= 0 ? v.substring(0, c) : v;
        crashOperation = c >= 0 ? v.substring(c + 1) : "";
        crashPoint = -1;
        for (int k = 0; k < POINTS.length; k++) {
          if (POINTS[k].equals(p)) crashPoint = k;
        }
        if (crashPoint < 0) usage("--crash: unknown point");
      }
      case 11 -> {
        try {
          crashRate = Double.parseDouble(v);
        } catch (NumberFormatException e) {
          crashRate = -1;
        }
        if (crashRate < 0 || crashRate > 1) usage("--crash-rate: 0..1");
      }
      case 12 -> stepDeadlineMs = num(FLAGS[i][0], v, 1, 3600000);
      case 13 -> callDeadlineMs = num(FLAGS[i][0], v, 1, 3600000);
      default -> usage("unknown flag");
    }
  }

  static Opts parse(String[] args) {
    Opts o = new Opts();
    for (int i = 0; i < FLAGS.length; i++) {
      String v = System.getenv(FLAGS[i][1]);
      if (v != null && !v.isEmpty()) o.apply(i, v);
    }
    for (int a = 0; a < args.length; a++) {
      if (args[a].equals("--help")) usage(null);
      int i = 0;
      while (i < FLAGS.length && !FLAGS[i][0].equals(args[a])) i++;
      if (i == FLAGS.length) usage("unknown flag");
      if (a + 1 >= args.length) usage("missing value");
      o.apply(i, args[++a]);
    }
    if (o.listen.isEmpty() || o.pg.isEmpty() || o.schema.isEmpty() || o.coordinator.isEmpty()) {
      usage("--listen, --pg, --schema and --coordinator are required");
    }
    if (!o.schema.matches("[a-z0-9_]{1,63}")) usage("--schema: 1-63 characters of [a-z0-9_]");
    return o;
  }

  /** SIGKILLs this process at point p when --crash or --crash-rate says so. */
  void crash(int p, String operation) {
    boolean die = crashPoint == p && (crashOperation.isEmpty() || crashOperation.equals(operation));
    if (crashRate > 0 && ThreadLocalRandom.current().nextDouble() < crashRate) die = true;
    if (!die) return;
    System.err.println("fault injection: SIGKILL at " + POINTS[p] + " of " + operation);
    System.err.flush();
    try {
      new ProcessBuilder("kill", "-KILL", Long.toString(ProcessHandle.current().pid())).inheritIO().start().waitFor();
      Thread.sleep(Long.MAX_VALUE); // the signal arrives
    } catch (Exception e) {
      Runtime.getRuntime().halt(137);
    }
  }
}
