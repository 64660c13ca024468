package dev.idem.client;

/** A step's phase (idem.v1 Phase). */
public enum Phase {
  FORWARD(1, "forward"), COMPENSATION(2, "compensation");

  final int wire;
  private final String word;

  Phase(int wire, String word) {
    this.wire = wire;
    this.word = word;
  }

  public String word() { return word; }
}
