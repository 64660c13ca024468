package dev.idem.client;

/** BeginStep's decision (idem.v1 Decision without its prefix). */
public enum Decision {
  PROCEED(1), REPLAY(2), SKIP_NULL_COMPENSATION(3), SKIP_ALREADY_COMPENSATED(4), PROCEED_UNGUARDED(5);

  final int wire;

  Decision(int wire) { this.wire = wire; }

  static Decision ofWire(int n) {
    for (Decision d : values()) {
      if (d.wire == n) return d;
    }
    return null;
  }
}
