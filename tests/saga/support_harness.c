/* The integration harness (a real idem-coordinator on loopback), shared with tests/integration:
 * the saga tests start the coordinator exactly as the integration tests do. */
#include "../integration/support_harness.c"
