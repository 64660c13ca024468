/* coord_includes_rpc.c — planted in coord/'s library by -DIDEM_PLANTED_LAYER_BREACH=coord-includes-rpc
 * (tests/layers/test_planted.sh): coord includes rpc's header, a higher layer's. The build's
 * include check must fail naming both layers before anything compiles. */
#include "rpc/rpc.h"

int coord__planted_include(void);

int coord__planted_include(void) { return 0; }
