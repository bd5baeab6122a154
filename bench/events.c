/* events.c - benchmark of the device layer's events (src/device): what one cross-device
 * synchronisation costs between two virtual host devices (cpu:0, cpu:1).
 *  - handoff: cpu:0 records an event, cpu:1's queue waits for it and records a second,
 *    which the host waits for; the time of the whole round trip (two queue threads woken,
 *    then the host), per round;
 *  - pipelined: the same chain of N records and waits queued at once, the host waiting
 *    only for the last: the cost of one record plus one wait when the queues stay hot.
 * The pool's own barrier (an empty tg_pool_run) is bench_pool. It uses the layer's private
 * header.
 * usage: bench_events
 */
#include "device/device.h"
#include "bench_util.h"

enum { ROUNDS = 2000, REPS = 11, CHAIN = 2000 };

int main(void) {
    if (tg_device_configure(2, 0) != TG_OK) {
        fprintf(stderr, "bench_events: %s\n", tg_last_error());
        return 1;
    }
    tg_device *a = tg_device_find("cpu:0"), *b = tg_device_find("cpu:1");
    /* an event is recorded on one queue only: the even ones on cpu:0, the odd ones and
       `done` on cpu:1 */
    tg_event *ev[2 * CHAIN], *done = tg_event_new();
    bool ok = done != NULL;
    for (int i = 0; i < 2 * CHAIN; i++) ok = (ev[i] = tg_event_new()) != NULL && ok;
    if (!a || !b || !ok) {
        fprintf(stderr, "bench_events: %s\n", tg_last_error());
        return 1;
    }
    double t[REPS];
    for (int r = 0; r < REPS; r++) { /* round trips, one at a time */
        double t0 = bench_now();
        for (int i = 0; i < ROUNDS; i++) {
            tg_event *e = ev[2 * (i % CHAIN)], *f = ev[2 * (i % CHAIN) + 1];
            if (tg_device_record(a, e) != TG_OK || tg_device_wait(b, e) != TG_OK ||
                tg_device_record(b, f) != TG_OK)
                return 1;
            tg_event_synchronize(f);
        }
        t[r] = (bench_now() - t0) / ROUNDS;
    }
    qsort(t, REPS, sizeof t[0], bench_cmp);
    printf("event handoff cpu:0 -> cpu:1 -> host: median %.3f us, min %.3f us (%d batches of %d)\n",
           t[REPS / 2] * 1e6, t[0] * 1e6, REPS, ROUNDS);
    for (int r = 0; r < REPS; r++) { /* a chain queued at once */
        double t0 = bench_now();
        for (int i = 0; i < CHAIN; i++) {
            tg_device *from = i % 2 ? b : a, *to = i % 2 ? a : b;
            if (tg_device_record(from, ev[i]) != TG_OK || tg_device_wait(to, ev[i]) != TG_OK)
                return 1;
        }
        if (tg_device_record(b, done) != TG_OK) return 1;
        tg_event_synchronize(done);
        t[r] = (bench_now() - t0) / CHAIN;
    }
    qsort(t, REPS, sizeof t[0], bench_cmp);
    printf("event record+wait across devices, pipelined: median %.3f us, min %.3f us (%d batches "
           "of %d)\n",
           t[REPS / 2] * 1e6, t[0] * 1e6, REPS, CHAIN);
    if (tg_device_synchronize(a) != TG_OK || tg_device_synchronize(b) != TG_OK) return 1;
    for (int i = 0; i < 2 * CHAIN; i++) tg_event_free(ev[i]);
    tg_event_free(done);
    return 0;
}
