/*
 * netlab-bottleneck: the user-space bottleneck of tools/netlab (issue 12, item 5).
 *
 * Runs in the lab's router namespace with two TUN devices. The router's policy
 * routing sends packets snd -> rcv into the forward device and rcv -> snd into
 * the back device; what this program writes back into a device comes in with
 * iif=<device> and is routed normally. Per direction a reader thread takes each
 * packet at its arrival, decides its fate at once (the queue is FIFO and its
 * service is deterministic, so the waiting time of every packet is known when
 * it arrives), and hands it to a timing thread that sleeps (clock_nanosleep,
 * CLOCK_MONOTONIC, SCHED_FIFO when allowed) until the packet's release time.
 *
 * Forward direction: a link of a scheduled rate with a drop-tail queue bounded
 * in bytes, then a fixed one-way delay. A packet's sojourn is the time it waits
 * before its transmission starts. Marking at the start of transmission:
 *   ECT(1): L4S step marking, CE when the sojourn exceeds the threshold;
 *   ECT(0) and Not-ECT: CoDel (RFC 8289, target 5 ms, interval 100 ms, at most
 *   one signal per dequeue): CE for ECT(0), a drop for Not-ECT.
 * Optional delay variation after the link (jitter=DUR): each packet forward
 * waits a further time drawn uniformly from [0, DUR]. By default the order is
 * kept (a packet drawn early waits for the one before it, as behind one link
 * whose service time varies, e.g. Wi-Fi's aggregation); with reorder=on it is
 * not (several paths, or a link that retries some frames): a packet may
 * overtake earlier ones, counted (Reordered: packets released before one that
 * arrived before them).
 * Optional duplication after the link (dup=PCT): that share of the UDP packets
 * forward leaves twice, the copy right after the original (a link layer that
 * retransmits a frame whose acknowledgement was lost), counted (Duplicated);
 * the copy takes no link time.
 * Optional ECN rewriting before the queue (ecn=bleach: every UDP packet forward
 * leaves Not-ECT, as behind a hop that clears the TOS byte's ECN field;
 * ecn=ect0: ECT(1) becomes ECT(0), as behind a hop that knows only classic
 * ECN), counted (EcnChanged); the AQM sees the rewritten codepoint.
 * Back direction: the fixed delay, optional random loss of UDP (feedback).
 *
 * Stats: SIGUSR1 (and exit) writes DIR/stats.json (flat JSON of integers);
 * DIR/series.csv gets a row per 100 ms of the schedule clock (tools/README.md).
 * Build: gcc -O2 -Wall -Wextra -Werror -pthread (tools/netlab does it at `up`).
 * Usage: netlab-bottleneck --check SPEC
 *        netlab-bottleneck --spec SPEC --fwd-dev IF --back-dev IF --dir DIR
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S ((uint64_t)1000000000)
#define NS_PER_MS ((uint64_t)1000000)
#define NS_PER_US ((uint64_t)1000)
#define MAX_STEPS 64
#define MAX_PACKET 65536
#define SERIES_NS (100 * NS_PER_MS)
#define SERIES_BINS 8192
#define HIST_FINE 65536 /* 1 us buckets below 65.536 ms, then 1 ms buckets */
#define HIST_BUCKETS (HIST_FINE + 65536)

/* ------------------------------------------------------------ config --- */

typedef struct {
  uint64_t at_ns; /* from the schedule clock's start */
  uint64_t bps;   /* 0: unlimited */
} Step;

static struct {
  Step steps[MAX_STEPS];
  int nsteps;
  uint64_t delay_ns, back_delay_ns;
  int back_delay_given;
  uint64_t queue_bytes;
  uint64_t l4s_ns; /* 0: off */
  int codel;
  uint64_t codel_target_ns, codel_interval_ns;
  uint32_t back_loss_ppm;
  uint64_t spin_ns; /* the timing thread wakes this early and spins to the release time */
  uint64_t jitter_ns; /* forward: extra delay uniform in [0, jitter_ns] */
  int reorder;        /* forward: jittered packets may overtake earlier ones */
  uint32_t dup_ppm;   /* forward: UDP packets sent twice, per million */
  int ecn_path;       /* forward, before the queue: 0 keep, 1 bleach (ECT and CE -> Not-ECT), 2 ECT(1) -> ECT(0) */
} cfg = {.spin_ns = 100 * NS_PER_US, .l4s_ns = NS_PER_MS, .codel = 1, .codel_target_ns = 5 * NS_PER_MS,
         .codel_interval_ns = 100 * NS_PER_MS};

static char spec_error[256];

static int fail(const char *fmt, const char *arg) {
  snprintf(spec_error, sizeof spec_error, fmt, arg);
  return -1;
}

/* "2.5" -> value * scale, exactly for up to 9 decimals. */
static int parse_decimal(const char *s, size_t len, uint64_t scale, uint64_t *out) {
  uint64_t whole = 0, frac = 0, div = 1;
  size_t i = 0;
  int digits = 0;
  for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
    if (whole > 1000000000000ULL) return -1;
    whole = whole * 10 + (uint64_t)(s[i] - '0');
  }
  if (i < len && s[i] == '.') {
    i++;
    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
      if (div >= 1000000000ULL) return -1;
      frac = frac * 10 + (uint64_t)(s[i] - '0');
      div *= 10;
    }
  }
  if (digits == 0 || i != len) return -1;
  *out = whole * scale + frac * scale / div;
  return 0;
}

static size_t number_len(const char *s) {
  size_t i = 0;
  while ((s[i] >= '0' && s[i] <= '9') || s[i] == '.') i++;
  return i;
}

static int parse_rate(const char *s, uint64_t *bps) {
  static const struct { const char *unit; uint64_t scale; } units[] = {
      {"bit", 1}, {"kbit", 1000}, {"mbit", 1000000}, {"gbit", 1000000000ULL},
      {"bps", 8}, {"kbps", 8000}, {"mbps", 8000000}};
  size_t n = number_len(s);
  for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
    if (strcasecmp(s + n, units[u].unit) == 0) {
      if (parse_decimal(s, n, units[u].scale, bps) != 0 || *bps < 8000 || *bps > 100000000000ULL)
        return fail("bad rate '%s' (8kbit to 100gbit, e.g. 2.5mbit)", s);
      return 0;
    }
  }
  return fail("bad rate '%s' (a number and bit|kbit|mbit|gbit|bps|kbps|mbps)", s);
}

static int parse_duration(const char *s, uint64_t max_ns, uint64_t *ns) {
  static const struct { const char *unit; uint64_t scale; } units[] = {
      {"us", NS_PER_US}, {"ms", NS_PER_MS}, {"s", NS_PER_S}};
  size_t n = number_len(s);
  for (size_t u = 0; u < 3; u++) {
    if (strcmp(s + n, units[u].unit) == 0) {
      if (parse_decimal(s, n, units[u].scale, ns) != 0 || *ns > max_ns)
        return fail("duration '%s' out of range", s);
      return 0;
    }
  }
  return fail("bad duration '%s' (a number and us|ms|s, e.g. 25ms)", s);
}

static int parse_step(const char *tok) {
  const char *at = strchr(tok, '@');
  if (!at) return fail("bad schedule step '%s' (RATE@SECONDS)", tok);
  if (cfg.nsteps == MAX_STEPS) return fail("too many schedule steps at '%s' (at most 64)", tok);
  char rate[64];
  size_t rlen = (size_t)(at - tok);
  if (rlen >= sizeof rate) return fail("bad schedule step '%s'", tok);
  memcpy(rate, tok, rlen);
  rate[rlen] = 0;
  Step *st = &cfg.steps[cfg.nsteps];
  if (parse_rate(rate, &st->bps) != 0) return -1;
  if (parse_decimal(at + 1, strlen(at + 1), NS_PER_S, &st->at_ns) != 0)
    return fail("bad schedule time in '%s' (seconds, e.g. 2.5mbit@40)", tok);
  if (cfg.nsteps == 0 && st->at_ns != 0) return fail("the schedule must start at 0 s ('%s')", tok);
  if (cfg.nsteps > 0 && st->at_ns <= cfg.steps[cfg.nsteps - 1].at_ns)
    return fail("schedule times must increase ('%s')", tok);
  cfg.nsteps++;
  return 0;
}

/* SPEC: key=value pairs separated by commas; schedule=R@T,R@T,... */
static int parse_spec(const char *spec) {
  char buf[4096];
  if (strlen(spec) >= sizeof buf) return fail("spec too long%s", "");
  strcpy(buf, spec);
  int in_schedule = 0, have_rate = 0, have_schedule = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq) {
      if (!in_schedule) return fail("bad item '%s' (key=value)", tok);
      if (parse_step(tok) != 0) return -1;
      continue;
    }
    *eq = 0;
    const char *key = tok, *val = eq + 1;
    in_schedule = 0;
    uint64_t v;
    if (strcmp(key, "rate") == 0) {
      if (parse_rate(val, &v) != 0) return -1;
      cfg.steps[0] = (Step){0, v};
      cfg.nsteps = 1;
      have_rate = 1;
    } else if (strcmp(key, "schedule") == 0) {
      cfg.nsteps = 0;
      if (parse_step(val) != 0) return -1;
      in_schedule = have_schedule = 1;
    } else if (strcmp(key, "delay") == 0) {
      if (parse_duration(val, 300 * NS_PER_MS, &cfg.delay_ns) != 0) return -1;
    } else if (strcmp(key, "backdelay") == 0) {
      if (parse_duration(val, 300 * NS_PER_MS, &cfg.back_delay_ns) != 0) return -1;
      cfg.back_delay_given = 1;
    } else if (strcmp(key, "queue") == 0) {
      if (parse_decimal(val, strlen(val), 1, &v) != 0 || v < 1500 || v > 1000000000ULL)
        return fail("bad queue '%s' (bytes, 1500 to 1000000000)", val);
      cfg.queue_bytes = v;
    } else if (strcmp(key, "l4s") == 0) {
      if (strcmp(val, "off") == 0) cfg.l4s_ns = 0;
      else if (parse_duration(val, NS_PER_S, &cfg.l4s_ns) != 0 || cfg.l4s_ns == 0)
        return fail("bad l4s '%s' (a threshold like 1ms, or off)", val);
    } else if (strcmp(key, "classic") == 0) {
      if (strcmp(val, "codel") == 0) cfg.codel = 1;
      else if (strcmp(val, "off") == 0) cfg.codel = 0;
      else return fail("bad classic '%s' (codel or off)", val);
    } else if (strcmp(key, "target") == 0) {
      if (parse_duration(val, NS_PER_S, &cfg.codel_target_ns) != 0 || cfg.codel_target_ns == 0)
        return fail("bad target '%s' (CoDel target, e.g. 5ms)", val);
    } else if (strcmp(key, "interval") == 0) {
      if (parse_duration(val, 10 * NS_PER_S, &cfg.codel_interval_ns) != 0 || cfg.codel_interval_ns == 0)
        return fail("bad interval '%s' (CoDel interval, e.g. 100ms)", val);
    } else if (strcmp(key, "spin") == 0) {
      if (parse_duration(val, NS_PER_MS, &cfg.spin_ns) != 0) return -1;
    } else if (strcmp(key, "jitter") == 0) {
      if (parse_duration(val, 300 * NS_PER_MS, &cfg.jitter_ns) != 0) return -1;
    } else if (strcmp(key, "reorder") == 0) {
      if (strcmp(val, "on") == 0) cfg.reorder = 1;
      else if (strcmp(val, "off") == 0) cfg.reorder = 0;
      else return fail("bad reorder '%s' (on or off)", val);
    } else if (strcmp(key, "ecn") == 0) {
      if (strcmp(val, "keep") == 0) cfg.ecn_path = 0;
      else if (strcmp(val, "bleach") == 0) cfg.ecn_path = 1;
      else if (strcmp(val, "ect0") == 0) cfg.ecn_path = 2;
      else return fail("bad ecn '%s' (keep, bleach or ect0)", val);
    } else if (strcmp(key, "dup") == 0) {
      if (parse_decimal(val, strlen(val), 10000, &v) != 0 || v > 1000000)
        return fail("bad dup '%s' (percent 0-100, e.g. 1)", val);
      cfg.dup_ppm = (uint32_t)v;
    } else if (strcmp(key, "backloss") == 0) {
      if (parse_decimal(val, strlen(val), 10000, &v) != 0 || v > 1000000)
        return fail("bad backloss '%s' (percent 0-100, e.g. 10)", val);
      cfg.back_loss_ppm = (uint32_t)v;
    } else {
      return fail("unknown key '%s' (rate delay backdelay jitter reorder dup ecn queue schedule l4s classic target interval backloss)", key);
    }
  }
  if (have_rate && have_schedule) return fail("give rate or schedule, not both%s", "");
  if (!cfg.back_delay_given) cfg.back_delay_ns = cfg.delay_ns;
  if (cfg.reorder && cfg.jitter_ns == 0) return fail("reorder=on needs jitter%s", "");
  if (cfg.queue_bytes == 0 && cfg.nsteps > 0) { /* 100 ms of the highest rate */
    uint64_t max_bps = 0;
    for (int i = 0; i < cfg.nsteps; i++)
      if (cfg.steps[i].bps > max_bps) max_bps = cfg.steps[i].bps;
    cfg.queue_bytes = max_bps / 80;
    if (cfg.queue_bytes < 3 * 1500) cfg.queue_bytes = 3 * 1500;
  }
  return 0;
}

/* ------------------------------------------------------------- clock --- */

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

/* Schedule clock: starts at the first forward UDP packet (0: not yet). */
static _Atomic uint64_t clock_start_ns;

static uint64_t rate_at(uint64_t t_ns) {
  uint64_t start = atomic_load_explicit(&clock_start_ns, memory_order_relaxed);
  uint64_t rel = start && t_ns > start ? t_ns - start : 0;
  uint64_t bps = cfg.steps[0].bps;
  for (int i = 1; i < cfg.nsteps && cfg.steps[i].at_ns <= rel; i++) bps = cfg.steps[i].bps;
  return bps;
}

/* -------------------------------------------------------------- stats --- */

typedef _Atomic uint64_t Counter;

static void add(Counter *c, uint64_t v) { atomic_fetch_add_explicit(c, v, memory_order_relaxed); }
static uint64_t get(Counter *c) { return atomic_load_explicit(c, memory_order_relaxed); }
static void raise_max(Counter *c, uint64_t v) {
  uint64_t cur = get(c);
  while (v > cur && !atomic_compare_exchange_weak_explicit(c, &cur, v, memory_order_relaxed,
                                                            memory_order_relaxed)) {
  }
}

typedef struct {
  Counter buckets[HIST_BUCKETS];
  Counter max_ns, count;
} Histogram;

static void hist_record(Histogram *h, uint64_t ns) {
  uint64_t us = ns / NS_PER_US, b = us < HIST_FINE ? us : HIST_FINE + (us / 1000 < 65535 ? us / 1000 : 65535);
  add(&h->buckets[b], 1);
  add(&h->count, 1);
  raise_max(&h->max_ns, ns);
}

/* The q-quantile in microseconds (lower edge of its bucket). */
static uint64_t hist_quantile_us(Histogram *h, double q) {
  uint64_t n = get(&h->count), rank = (uint64_t)ceil(q * (double)n), seen = 0;
  if (n == 0) return 0;
  if (rank == 0) rank = 1;
  for (uint64_t b = 0; b < HIST_BUCKETS; b++) {
    seen += get(&h->buckets[b]);
    if (seen >= rank) return b < HIST_FINE ? b : (b - HIST_FINE) * 1000;
  }
  return get(&h->max_ns) / NS_PER_US;
}

typedef struct {
  Counter arrived, arrived_bytes, forwarded, forwarded_bytes, tail_dropped, aqm_dropped,
      l4s_marked, classic_marked, loss_dropped, oversize, write_errors, reordered, duplicated, ecn_changed;
  Histogram sojourn, lateness;
} DirStats;

typedef struct {
  Counter arrived_bytes, served_bytes, qdelay_sum_ns, qdelay_max_ns, qdelay_n, tail, aqm, l4s,
      classic, back_packets, back_lost;
} Bin;

static Bin bins[SERIES_BINS], before_start;

static Bin *bin_at(uint64_t t_ns) {
  uint64_t start = atomic_load_explicit(&clock_start_ns, memory_order_relaxed);
  if (start == 0) return &before_start; /* the series starts with the schedule clock */
  uint64_t k = t_ns > start ? (t_ns - start) / SERIES_NS : 0;
  return &bins[k % SERIES_BINS];
}

/* ---------------------------------------------------------- direction --- */

typedef struct Packet {
  struct Packet *next;
  uint64_t release_ns;
  uint32_t len;
  uint8_t data[];
} Packet;

typedef struct {
  const char *name;
  int fd;
  int forward; /* 1: snd -> rcv (rate, queue, AQM); 0: rcv -> snd */
  uint64_t delay_ns;
  DirStats st;
  /* delay line: reader pushes, timing thread pops */
  pthread_mutex_t lock;
  pthread_cond_t nonempty;
  Packet *head, *tail;
  /* link state, reader thread only */
  uint64_t busy_until_ns;
  uint64_t *inq_end; /* ring of (service end, len) of packets not yet transmitted */
  uint32_t *inq_len;
  size_t inq_cap, inq_head, inq_count;
  uint64_t queued_bytes;
  /* CoDel state (RFC 8289), reader thread only */
  uint64_t first_above_ns, drop_next_ns;
  uint32_t count, last_count;
  int dropping;
  uint64_t rng;
  uint64_t last_release_ns; /* the latest release time given so far (reader thread only) */
} Direction;

static Direction fwd = {.name = "fwd", .forward = 1}, back = {.name = "back", .forward = 0};
static int fifo_ok = 1;

static void use_fifo(int prio) {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  struct sched_param sp = {.sched_priority = prio};
  if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) fifo_ok = 0;
}

/* Sets the ECN field to ecn (0-3). */
static void ecn_set(uint8_t *p, int ecn) {
  if ((p[0] >> 4) == 4) {
    uint16_t old = (uint16_t)(p[0] << 8 | p[1]);
    p[1] = (uint8_t)((p[1] & ~3) | ecn);
    uint16_t new = (uint16_t)(p[0] << 8 | p[1]);
    /* RFC 1624 incremental update: HC' = ~(~HC + ~m + m') */
    uint32_t sum = (uint16_t) ~(p[10] << 8 | p[11]);
    sum += (uint16_t)~old;
    sum += new;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    uint16_t hc = (uint16_t)~sum;
    p[10] = (uint8_t)(hc >> 8);
    p[11] = (uint8_t)hc;
  } else {
    /* IPv6: traffic class bits 0-1 (bits 4-5 of the second byte) are the ECN field; no header checksum */
    p[1] = (uint8_t)((p[1] & ~0x30) | ecn << 4);
  }
}

static void ecn_set_ce(uint8_t *p) { ecn_set(p, 3); }

static int ecn_of(const uint8_t *p) { return (p[0] >> 4) == 4 ? (p[1] & 3) : ((p[1] >> 4) & 3); }
static int is_udp(const uint8_t *p, size_t len) {
  if ((p[0] >> 4) == 4) return len >= 20 && p[9] == 17;
  return len >= 40 && p[6] == 17;
}

/* The router's own link-local traffic on the device (IPv6 MLD reports): never routed traffic. */
static int is_local_chatter(const uint8_t *p) {
  if ((p[0] >> 4) == 4) return p[16] >= 224; /* multicast / broadcast destination */
  return p[24] == 0xff;                      /* IPv6 multicast destination */
}

static uint64_t xorshift(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* CoDel at the start of transmission: 1 when this packet is to be signalled. */
static int codel_signal(Direction *d, uint64_t now, uint64_t sojourn) {
  int ok_to_signal = 0;
  if (sojourn < cfg.codel_target_ns || d->queued_bytes <= 1500) {
    d->first_above_ns = 0;
  } else if (d->first_above_ns == 0) {
    d->first_above_ns = now + cfg.codel_interval_ns;
  } else if (now >= d->first_above_ns) {
    ok_to_signal = 1;
  }
  if (d->dropping) {
    if (!ok_to_signal) {
      d->dropping = 0;
      return 0;
    }
    if (now >= d->drop_next_ns) {
      d->count++;
      d->drop_next_ns += (uint64_t)((double)cfg.codel_interval_ns / sqrt((double)d->count));
      return 1;
    }
    return 0;
  }
  if (ok_to_signal) {
    d->dropping = 1;
    uint32_t delta = d->count - d->last_count;
    /* RFC 8289: resume near the last drop rate when the last dropping state ended recently
       (signed: drop_next may still lie ahead) */
    int64_t since_next = (int64_t)(now - d->drop_next_ns);
    d->count = (delta > 1 && since_next < (int64_t)(16 * cfg.codel_interval_ns)) ? delta : 1;
    d->drop_next_ns = now + (uint64_t)((double)cfg.codel_interval_ns / sqrt((double)d->count));
    d->last_count = d->count;
    return 1;
  }
  return 0;
}

static void inq_push(Direction *d, uint64_t end, uint32_t len) {
  if (d->inq_count == d->inq_cap) { /* grow the ring */
    size_t cap = d->inq_cap ? d->inq_cap * 2 : 4096;
    uint64_t *e = malloc(cap * sizeof *e);
    uint32_t *l = malloc(cap * sizeof *l);
    if (!e || !l) { perror("netlab-bottleneck: malloc"); exit(1); }
    for (size_t i = 0; i < d->inq_count; i++) {
      e[i] = d->inq_end[(d->inq_head + i) % d->inq_cap];
      l[i] = d->inq_len[(d->inq_head + i) % d->inq_cap];
    }
    free(d->inq_end);
    free(d->inq_len);
    d->inq_end = e, d->inq_len = l, d->inq_cap = cap, d->inq_head = 0;
  }
  size_t i = (d->inq_head + d->inq_count) % d->inq_cap;
  d->inq_end[i] = end;
  d->inq_len[i] = len;
  d->inq_count++;
  d->queued_bytes += len;
}

static void inq_drain(Direction *d, uint64_t now) {
  while (d->inq_count > 0 && d->inq_end[d->inq_head] <= now) {
    d->queued_bytes -= d->inq_len[d->inq_head];
    d->inq_head = (d->inq_head + 1) % d->inq_cap;
    d->inq_count--;
  }
}

/* Forward link: returns the release time, or 0 when the packet is dropped. */
static uint64_t forward_link(Direction *d, uint8_t *p, uint32_t len, uint64_t now) {
  Bin *arrival_bin = bin_at(now);
  add(&arrival_bin->arrived_bytes, len);
  uint64_t bps0 = cfg.nsteps ? rate_at(now) : 0;
  if (cfg.nsteps == 0 || bps0 == 0) { /* no rate: a pure delay */
    hist_record(&d->st.sojourn, 0);
    add(&arrival_bin->served_bytes, len);
    add(&arrival_bin->qdelay_n, 1);
    return now + d->delay_ns;
  }
  inq_drain(d, now);
  if (d->queued_bytes + len > cfg.queue_bytes) {
    add(&d->st.tail_dropped, 1);
    add(&arrival_bin->tail, 1);
    return 0;
  }
  uint64_t start = d->busy_until_ns > now ? d->busy_until_ns : now, sojourn = start - now;
  Bin *start_bin = bin_at(start);
  int ecn = ecn_of(p);
  if (ecn == 1 || ecn == 3) { /* ECT(1), or CE already: the L4S treatment */
    if (ecn == 1 && cfg.l4s_ns && sojourn > cfg.l4s_ns) {
      ecn_set_ce(p);
      add(&d->st.l4s_marked, 1);
      add(&start_bin->l4s, 1);
    }
  } else if (cfg.codel && codel_signal(d, start, sojourn)) {
    if (ecn == 2) {
      ecn_set_ce(p);
      add(&d->st.classic_marked, 1);
      add(&start_bin->classic, 1);
    } else {
      add(&d->st.aqm_dropped, 1);
      add(&start_bin->aqm, 1);
      inq_push(d, start, len); /* it occupied the queue until its dequeue */
      return 0;
    }
  }
  uint64_t bps = rate_at(start);
  uint64_t end = start + (uint64_t)len * 8 * NS_PER_S / bps;
  d->busy_until_ns = end;
  inq_push(d, end, len);
  hist_record(&d->st.sojourn, sojourn);
  add(&start_bin->qdelay_sum_ns, sojourn);
  add(&start_bin->qdelay_n, 1);
  raise_max(&start_bin->qdelay_max_ns, sojourn);
  add(&bin_at(end)->served_bytes, len);
  return end + d->delay_ns;
}

/* Puts pk into the delay line in release order (at the tail unless it overtakes); returns
   whether it became the head, which the timing thread must hear of. Called with the lock. */
static int delay_line_insert(Direction *d, Packet *pk) {
  if (!d->tail || d->tail->release_ns <= pk->release_ns) {
    if (d->tail) d->tail->next = pk; else d->head = pk;
    d->tail = pk;
    return d->head == pk;
  }
  Packet **at = &d->head; /* it overtakes (reorder=on): after the last one due no later */
  while ((*at)->release_ns <= pk->release_ns) at = &(*at)->next;
  pk->next = *at;
  *at = pk;
  return d->head == pk;
}

static void *reader(void *arg) {
  Direction *d = arg;
  use_fifo(50);
  static _Thread_local uint8_t buf[MAX_PACKET];
  for (;;) {
    ssize_t n = read(d->fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      perror("netlab-bottleneck: read");
      exit(1);
    }
    uint64_t now = mono_ns();
    if (n < 20 || is_local_chatter(buf)) continue;
    uint32_t len = (uint32_t)n;
    int udp = is_udp(buf, len);
    if (d->forward && udp && atomic_load_explicit(&clock_start_ns, memory_order_relaxed) == 0)
      atomic_store(&clock_start_ns, now);
    add(&d->st.arrived, 1);
    add(&d->st.arrived_bytes, len);
    uint64_t release;
    if (d->forward && udp && cfg.ecn_path) { /* a hop before the bottleneck that rewrites ECN */
      int ecn = ecn_of(buf), to = cfg.ecn_path == 1 ? 0 : (ecn == 1 ? 2 : ecn);
      if (to != ecn) {
        ecn_set(buf, to);
        add(&d->st.ecn_changed, 1);
      }
    }
    if (d->forward) {
      release = forward_link(d, buf, len, now);
      if (release == 0) continue;
    } else {
      if (udp && cfg.back_loss_ppm && xorshift(&d->rng) % 1000000 < cfg.back_loss_ppm) {
        add(&d->st.loss_dropped, 1);
        add(&bin_at(now)->back_lost, 1);
        continue;
      }
      hist_record(&d->st.sojourn, 0);
      add(&bin_at(now)->back_packets, 1);
      release = now + d->delay_ns;
    }
    if (d->forward && cfg.jitter_ns) {
      release += xorshift(&d->rng) % (cfg.jitter_ns + 1);
      if (release < d->last_release_ns) {
        if (cfg.reorder) add(&d->st.reordered, 1);
        else release = d->last_release_ns; /* one link: it waits for the packet before it */
      }
    }
    if (release > d->last_release_ns) d->last_release_ns = release;
    /* dup=PCT: a second copy, due at the same time, goes in right after the original
       (equal release times keep their order in the delay line). */
    int copies = d->forward && udp && cfg.dup_ppm && xorshift(&d->rng) % 1000000 < cfg.dup_ppm ? 2 : 1;
    if (copies == 2) add(&d->st.duplicated, 1);
    for (int c = 0; c < copies; c++) {
      Packet *pk = malloc(sizeof *pk + len);
      if (!pk) { perror("netlab-bottleneck: malloc"); exit(1); }
      pk->next = NULL;
      pk->release_ns = release;
      pk->len = len;
      memcpy(pk->data, buf, len);
      pthread_mutex_lock(&d->lock);
      int new_head = delay_line_insert(d, pk);
      pthread_mutex_unlock(&d->lock);
      if (new_head) pthread_cond_signal(&d->nonempty);
    }
  }
  return NULL;
}

/* Releases in the delay line's order: FIFO per direction (a constant delay after a FIFO link),
   unless reorder=on lets a packet in ahead of the head: then the wait is on the condition
   variable (CLOCK_MONOTONIC), which the reader signals for a new head. */
static void *timer(void *arg) {
  Direction *d = arg;
  use_fifo(60);
  for (;;) {
    pthread_mutex_lock(&d->lock);
    Packet *pk;
    uint64_t now;
    for (;;) {
      while (!d->head) pthread_cond_wait(&d->nonempty, &d->lock);
      pk = d->head;
      uint64_t wake = pk->release_ns - cfg.spin_ns;
      now = mono_ns();
      if (wake <= now) break;
      struct timespec ts = {(time_t)(wake / NS_PER_S), (long)(wake % NS_PER_S)};
      if (cfg.reorder) {
        pthread_cond_timedwait(&d->nonempty, &d->lock, &ts);
        continue; /* the head may have changed */
      }
      pthread_mutex_unlock(&d->lock); /* FIFO: the head stays this packet */
      while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
      }
      pthread_mutex_lock(&d->lock);
      break;
    }
    d->head = pk->next;
    if (!d->head) d->tail = NULL;
    pthread_mutex_unlock(&d->lock);
    /* Yield while spinning: another lab's timing thread of the same priority on this
       core runs instead of waiting for this one to block. (One that overtakes this packet
       now, due within the spin, goes out after it, late by less than the spin.) */
    while ((now = mono_ns()) < pk->release_ns) sched_yield();
    hist_record(&d->st.lateness, now > pk->release_ns ? now - pk->release_ns : 0);
    if (write(d->fd, pk->data, pk->len) == (ssize_t)pk->len) {
      add(&d->st.forwarded, 1);
      add(&d->st.forwarded_bytes, pk->len);
    } else {
      add(&d->st.write_errors, 1);
    }
    free(pk);
  }
  return NULL;
}

/* ------------------------------------------------------------ output --- */

static const char *dir_path;

static void write_file(const char *name, const char *text) {
  char path[4096], tmp[4200];
  snprintf(path, sizeof path, "%s/%s", dir_path, name);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
  rename(tmp, path);
}

static int dir_json(char *out, size_t cap, const char *pfx, Direction *d) {
  DirStats *s = &d->st;
  return snprintf(out, cap,
      "\"%sArrived\":%lu,\"%sArrivedBytes\":%lu,\"%sForwarded\":%lu,\"%sForwardedBytes\":%lu,"
      "\"%sTailDropped\":%lu,\"%sAqmDropped\":%lu,\"%sL4sMarked\":%lu,\"%sClassicMarked\":%lu,"
      "\"%sLossDropped\":%lu,\"%sWriteErrors\":%lu,\"%sReordered\":%lu,\"%sDuplicated\":%lu,\"%sEcnChanged\":%lu,"
      "\"%sSojournP50Us\":%lu,\"%sSojournP95Us\":%lu,\"%sSojournP99Us\":%lu,\"%sSojournMaxUs\":%lu,"
      "\"%sJitterP50Us\":%lu,\"%sJitterP99Us\":%lu,\"%sJitterMaxUs\":%lu",
      pfx, get(&s->arrived), pfx, get(&s->arrived_bytes), pfx, get(&s->forwarded), pfx,
      get(&s->forwarded_bytes), pfx, get(&s->tail_dropped), pfx, get(&s->aqm_dropped), pfx,
      get(&s->l4s_marked), pfx, get(&s->classic_marked), pfx, get(&s->loss_dropped), pfx,
      get(&s->write_errors), pfx, get(&s->reordered), pfx, get(&s->duplicated), pfx, get(&s->ecn_changed), pfx, hist_quantile_us(&s->sojourn, 0.50), pfx,
      hist_quantile_us(&s->sojourn, 0.95), pfx, hist_quantile_us(&s->sojourn, 0.99), pfx,
      get(&s->sojourn.max_ns) / NS_PER_US, pfx, hist_quantile_us(&s->lateness, 0.50), pfx,
      hist_quantile_us(&s->lateness, 0.99), pfx, get(&s->lateness.max_ns) / NS_PER_US);
}

static void write_stats(void) {
  static char text[8192];
  int n = snprintf(text, sizeof text, "{\"bottleneckSchedFifo\":%d,", fifo_ok);
  n += dir_json(text + n, sizeof text - (size_t)n, "bottleneck", &fwd);
  n += snprintf(text + n, sizeof text - (size_t)n, ",");
  n += dir_json(text + n, sizeof text - (size_t)n, "bottleneckBack", &back);
  snprintf(text + n, sizeof text - (size_t)n, "}\n");
  write_file("stats.json", text);
}

static FILE *series;
static uint64_t series_next; /* index of the next row to write */

static uint64_t take(Counter *c) { return atomic_exchange_explicit(c, 0, memory_order_relaxed); }

/* Rows for every interval that has ended (with 20 ms for a late reader). */
static void write_series(uint64_t now) {
  uint64_t start = atomic_load(&clock_start_ns);
  if (start == 0) return;
  while (start + (series_next + 1) * SERIES_NS + 20 * NS_PER_MS <= now) {
    Bin *b = &bins[series_next % SERIES_BINS];
    uint64_t t = series_next * SERIES_NS;
    uint64_t bps = 0;
    if (cfg.nsteps) {
      bps = cfg.steps[0].bps;
      for (int i = 1; i < cfg.nsteps && cfg.steps[i].at_ns <= t; i++) bps = cfg.steps[i].bps;
    }
    uint64_t n = take(&b->qdelay_n), sum = take(&b->qdelay_sum_ns);
    fprintf(series, "%.1f,%lu,%lu,%lu,%.3f,%.3f,%lu,%lu,%lu,%lu,%lu,%lu,%lu\n",
            (double)t / NS_PER_S, bps, take(&b->arrived_bytes) * 8 * NS_PER_S / SERIES_NS,
            take(&b->served_bytes) * 8 * NS_PER_S / SERIES_NS,
            n ? (double)sum / (double)n / 1e6 : 0.0, (double)take(&b->qdelay_max_ns) / 1e6, n,
            take(&b->tail), take(&b->aqm), take(&b->l4s), take(&b->classic), take(&b->back_packets),
            take(&b->back_lost));
    series_next++;
  }
  fflush(series);
}

/* --------------------------------------------------------------- main --- */

static int open_tun(const char *name) {
  int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
  if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void usage_exit(void) {
  fprintf(stderr, "usage: netlab-bottleneck --check SPEC | --spec SPEC --fwd-dev IF --back-dev IF --dir DIR\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *spec = NULL, *fwd_dev = NULL, *back_dev = NULL;
  int check = 0;
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc) usage_exit();
    if (strcmp(argv[i], "--check") == 0) check = 1, spec = argv[++i];
    else if (strcmp(argv[i], "--spec") == 0) spec = argv[++i];
    else if (strcmp(argv[i], "--fwd-dev") == 0) fwd_dev = argv[++i];
    else if (strcmp(argv[i], "--back-dev") == 0) back_dev = argv[++i];
    else if (strcmp(argv[i], "--dir") == 0) dir_path = argv[++i];
    else usage_exit();
  }
  if (!spec) usage_exit();
  if (parse_spec(spec) != 0) {
    fprintf(stderr, "%s\n", spec_error);
    return 2;
  }
  if (check) {
    printf("steps=%d delay_us=%lu backdelay_us=%lu queue=%lu l4s_us=%lu codel=%d backloss_ppm=%u jitter_us=%lu "
           "reorder=%d dup_ppm=%u ecn=%d\n",
           cfg.nsteps, cfg.delay_ns / NS_PER_US, cfg.back_delay_ns / NS_PER_US, cfg.queue_bytes,
           cfg.l4s_ns / NS_PER_US, cfg.codel, cfg.back_loss_ppm, cfg.jitter_ns / NS_PER_US, cfg.reorder, cfg.dup_ppm, cfg.ecn_path);
    return 0;
  }
  if (!fwd_dev || !back_dev || !dir_path) usage_exit();

  fwd.delay_ns = cfg.delay_ns;
  back.delay_ns = cfg.back_delay_ns;
  back.rng = 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() ^ mono_ns();
  fwd.rng = back.rng * 0xbf58476d1ce4e5b9ULL + 1; /* its own stream (jitter) */
  Direction *dirs[2] = {&fwd, &back};
  const char *devs[2] = {fwd_dev, back_dev};
  for (int i = 0; i < 2; i++) {
    dirs[i]->fd = open_tun(devs[i]);
    if (dirs[i]->fd < 0) {
      fprintf(stderr, "netlab-bottleneck: cannot create TUN device %s: %s\n", devs[i], strerror(errno));
      return 1;
    }
    pthread_mutex_init(&dirs[i]->lock, NULL);
    pthread_condattr_t attr; /* timed waits on the release clock */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&dirs[i]->nonempty, &attr);
    pthread_condattr_destroy(&attr);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/series.csv", dir_path);
  series = fopen(path, "w");
  if (!series) {
    fprintf(stderr, "netlab-bottleneck: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  fprintf(series, "time_s,capacity_bps,arrived_bps,served_bps,qdelay_avg_ms,qdelay_max_ms,packets,"
                  "tail_drops,aqm_drops,l4s_marks,classic_marks,back_packets,back_lost\n");
  fflush(series);
  mlockall(MCL_CURRENT | MCL_FUTURE);

  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGUSR1);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);
  pthread_t th;
  for (int i = 0; i < 2; i++) {
    if (pthread_create(&th, NULL, reader, dirs[i]) != 0 || pthread_create(&th, NULL, timer, dirs[i]) != 0) {
      fprintf(stderr, "netlab-bottleneck: cannot start threads\n");
      return 1;
    }
  }
  write_stats();
  char pid[32];
  snprintf(pid, sizeof pid, "%d\n", (int)getpid());
  write_file("ready", pid); /* tools/netlab waits for it, then routes traffic into the devices */
  for (;;) {
    struct timespec wait = {0, (long)(50 * NS_PER_MS)};
    int sig = sigtimedwait(&sigs, NULL, &wait);
    write_series(mono_ns());
    if (sig == SIGUSR1) write_stats();
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) break;
  }
  write_stats();
  fclose(series);
  return 0;
}
