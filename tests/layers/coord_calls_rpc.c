/* coord_calls_rpc.c — planted in coord/'s library by -DIDEM_PLANTED_LAYER_BREACH=coord-calls-rpc
 * (tests/layers/test_planted.sh): coord calls rpc, a higher layer, through a declaration written
 * by hand, so no #include shows it. The build's layer check must fail naming both layers. */
void rpc_init(void); /* rpc/rpc.h's, without its include */
void coord__planted_rpc_init(void);

void coord__planted_rpc_init(void) { rpc_init(); }
