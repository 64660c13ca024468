package dev.idem.conformance;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * client-lib/conformance/scenarios.json as JUnit tests, one per scenario, against the
 * coordinators client-lib/conformance/run starts (the same runner as {@link Runner#main}). A
 * scenario that needs a capability this SDK lacks is printed "skip NAME: needs WHAT" and reported
 * as skipped (aborted by its assumption), not run.
 */
class ConformanceTest {
  @TestFactory
  List<DynamicTest> scenarios() throws Exception {
    List<DynamicTest> out = new ArrayList<>();
    for (JsonObject sc : Runner.scenarios()) {
      String name = sc.get("name").getAsString();
      String need = Runner.lacks(sc);
      out.add(DynamicTest.dynamicTest(name, () -> {
        if (need != null) System.out.println("skip " + name + ": needs " + need);
        assumeTrue(need == null, () -> "skip " + name + ": needs " + need);
        assertNull(Runner.run(sc), name);
      }));
    }
    return out;
  }
}
