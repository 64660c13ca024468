/* store_calls_coord.c — planted in store/'s library by -DIDEM_PLANTED_LAYER_BREACH=store-calls-coord
 * (tests/layers/test_planted.sh): store calls coord, a higher layer, through a declaration written
 * by hand, so no #include shows it. The build's layer check must fail naming both layers. */
#include <stdint.h>

int coord_check_wait_ms(uint32_t wait_ms, void *err); /* coord/coord.h's, without its include */
int store__planted_wait_check(void);

int store__planted_wait_check(void) { return coord_check_wait_ms(0, 0); }
