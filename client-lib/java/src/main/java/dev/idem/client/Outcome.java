package dev.idem.client;

/** What an action reports (idem.v1 Outcome); {@link #word()} as idemctl and the journal spell it. */
public enum Outcome {
  SUCCEEDED(1, "succeeded"), FAILED(2, "failed"), RETRYABLE(3, "retryable"), UNKNOWN(4, "unknown");

  final int wire;
  private final String word;

  Outcome(int wire, String word) {
    this.wire = wire;
    this.word = word;
  }

  public String word() { return word; }

  static Outcome ofWire(int n) {
    for (Outcome o : values()) {
      if (o.wire == n) return o;
    }
    return UNKNOWN;
  }

  /** The outcome a word names ("succeeded", …); null when none. */
  public static Outcome ofWord(String w) {
    for (Outcome o : values()) {
      if (o.word.equals(w)) return o;
    }
    return null;
  }
}
