package dev.idem.client;

/**
 * The action of {@link IdemClient#run}: does the step's work and reports its result. Returning
 * null completes the step as unknown (it may have acted); so does an exception, which is then
 * thrown again from run (a checked one wrapped in an {@link IdemException} ACTION_FAILED).
 */
@FunctionalInterface
public interface StepAction {
  StepResult run(StepContext ctx) throws Exception;
}
