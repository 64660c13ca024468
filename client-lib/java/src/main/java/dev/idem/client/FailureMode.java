package dev.idem.client;

/** An operation's failure mode (docs/api.md §6): what a step does when no coordinator can decide. */
public enum FailureMode {
  FAIL_CLOSED(1, "fail-closed"), FAIL_OPEN(2, "fail-open");

  final int wire;
  private final String word;

  FailureMode(int wire, String word) {
    this.wire = wire;
    this.word = word;
  }

  public String word() { return word; }

  public static FailureMode ofWord(String w) {
    for (FailureMode m : values()) {
      if (m.word.equals(w)) return m;
    }
    return null;
  }
}
