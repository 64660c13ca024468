/* placeholder until the rpc module lands */
int main(void) { return 1; }
