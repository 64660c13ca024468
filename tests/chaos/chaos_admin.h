/* chaos_admin.h — idem-chaos-client's modes for the nemesis (chaos_admin.c): who leads, the
 * move under way, and a move at random. Each prints its answer on stdout; 0 or 1 (no answer). */
#ifndef IDEM_CHAOS_ADMIN_H
#define IDEM_CHAOS_ADMIN_H

int chaos_leader(const char *addrs);
int chaos_group_leader(const char *group, const char *addrs);
int chaos_groups_led(const char *addrs);
int chaos_move(const char *addrs, unsigned long long seed, const char *rid);

#endif
