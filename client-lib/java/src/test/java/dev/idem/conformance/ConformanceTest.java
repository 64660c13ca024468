package dev.idem.conformance;

import static org.junit.jupiter.api.Assertions.assertNull;

import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

/**
 * client-lib/conformance/scenarios.json as JUnit tests, one per scenario, against the
 * coordinators client-lib/conformance/run starts (the same runner as {@link Runner#main}).
 */
class ConformanceTest {
  @TestFactory
  List<DynamicTest> scenarios() throws Exception {
    List<DynamicTest> out = new ArrayList<>();
    for (JsonObject sc : Runner.scenarios()) {
      String name = sc.get("name").getAsString();
      out.add(DynamicTest.dynamicTest(name, () -> assertNull(Runner.run(sc), name)));
    }
    return out;
  }
}
