package dev.idem.client;

/** A typed step's action that wants its {@link StepContext} (the attempt, the lost lease). */
@FunctionalInterface
public interface StepFunction<T> {
  T apply(StepContext ctx) throws Exception;
}
