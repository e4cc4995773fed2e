/*
 * tsm_threadpool.c -- the thread pool behind tsm_parallel_for.
 *
 * Why this shape: generated kernels call tsm_parallel_for many times per run, back to
 * back, so a call must cost about a microsecond, not thread creations. Workers are
 * created once, lazily, by the first parallel loop that needs them; between loops they
 * poll briefly (the next loop usually follows at once: waking a sleeping thread costs up to
 * ~150 us on virtual machines) and then sleep on a condition variable, so an idle process
 * burns no CPU.
 *
 * A loop splits [0, n) into TSM_CHUNKS_PER_THREAD contiguous chunks per thread, and
 * gives each thread a contiguous run of them (its share of the rows or panels stays in
 * its own cache, as with one chunk per thread). A thread takes its chunks front to back;
 * one that runs out takes the others' from the back. So a thread the OS delays -- a
 * worker not woken yet, a virtual core the host took away for a few milliseconds, which
 * on shared 2-core hosts happened in about a third of the runs -- holds up at most one
 * chunk: the others run on whoever is there, where one chunk per thread made the whole
 * loop wait for the late thread's half.
 *
 * A worker handed a chunk on the caller's core moves to another one. Linux tends to
 * wake a thread on the core of the thread that woke it; the two then share that core
 * while the others idle (the idle ones do not pull a task that ran a moment ago), so a
 * loop ran on one core, and the polling worker took half of it from the caller: runs
 * after a pause took up to twice as long, in blocks, at random (2 cores, Zen 3).
 *
 * One parallel loop owns the pool at a time. A call that finds the pool busy -- a nested
 * loop inside a body, or a second model running on another thread -- runs its whole range
 * inline: always correct, never a deadlock, and with several models running at once the
 * cores are busy anyway.
 *
 * fork(): the child has no workers, so a pthread_atfork handler resets the pool there
 * (the autotuner measures in forked processes). dlclose(): a destructor stops and joins
 * the workers before their code is unmapped.
 */
#define _GNU_SOURCE

#include "tsm_threadpool.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* How long a waiting thread polls before it sleeps, unless TSM_SPIN_US says otherwise:
 * long enough to bridge the gap between kernels, and between runs in a loop driven from
 * Python; short enough that an idle process stops using CPU almost at once. */
#define TSM_DEFAULT_SPIN_US 500

typedef void (*tsm_body_fn)(void *closure, int64_t begin, int64_t end);

/* Chunks per thread: enough that a late thread holds up little of a loop, few enough
 * that each thread's share stays one contiguous run in the common case. */
#define TSM_CHUNKS_PER_THREAD 4

/* One worker thread. Its ticket is bumped for every loop it is asked to join. */
typedef struct {
  pthread_t thread;
  atomic_uint ticket;
  unsigned seen; /* the last ticket this worker looked at; its own */
  int slot;      /* its run of chunks: slot 0 is the caller's */
} tsm_worker;

/* The loop being run. The caller writes body..chunks and finished, then each thread's run
 * of chunks into runs[] (release). A thread reads body..chunks only after it claimed a
 * chunk from runs[] (acquire), and the caller rewrites them only once every chunk has
 * finished, so a claimed chunk always runs with its own loop's fields (a late thread
 * whose claim lands in the next loop just helps with that one). A run is one word, the
 * next chunk to take from the front in the low half and the end in the high half, so
 * both ends move with one compare-and-swap. */
static struct {
  tsm_body_fn body;
  void *closure;
  int64_t n;
  int64_t chunks;
  atomic_int finished;
  atomic_ullong runs[TSM_MAX_THREADS]; /* one per thread of the loop */
  atomic_int num_runs;
} loop;

static struct {
  pthread_mutex_t lock;   /* guards sleeping and waking, and the workers array */
  pthread_cond_t wake;    /* idle workers sleep here */
  pthread_cond_t done;    /* the caller sleeps here until every chunk has finished */
  atomic_int busy;        /* 1 while a parallel loop owns the pool */
  atomic_int shutdown;    /* set by the destructor: workers exit, loops run inline */
  atomic_int caller_cpu;  /* the core the current loop's caller ran on when it posted */
  tsm_worker **workers;
  int num_workers;
  int capacity;
} pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .wake = PTHREAD_COND_INITIALIZER,
    .done = PTHREAD_COND_INITIALIZER,
};

static atomic_int configured_threads; /* 0 until decided */
static atomic_int oversubscribed;     /* more threads configured than cores available */
static atomic_llong spin_ns = -1;     /* -1 until read from TSM_SPIN_US */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* ---- thread count ------------------------------------------------------------------ */

static int clamp_threads(long n) {
  if (n < 1) return 1;
  return n > TSM_MAX_THREADS ? TSM_MAX_THREADS : (int)n;
}

/* Cores this process may run on (its affinity mask), else the cores online. */
static int cores_available(void) {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) {
    return clamp_threads(CPU_COUNT(&set));
  }
#endif
  return clamp_threads(sysconf(_SC_NPROCESSORS_ONLN));
}

/* A positive integer from the environment, else fallback. */
static long positive_env(const char *name, long fallback, long max) {
  const char *text = getenv(name);
  if (text != NULL && *text != '\0') {
    char *end = NULL;
    errno = 0;
    long n = strtol(text, &end, 10);
    if (errno == 0 && end != text && *end == '\0' && n >= 0 && n <= max) return n;
  }
  return fallback;
}

static void use_threads(int n) {
  atomic_store(&oversubscribed, n > cores_available());
  atomic_store(&configured_threads, n);
}

void tsm_pool_set_num_threads(int n) { use_threads(n == 0 ? cores_available() : clamp_threads(n)); }

int tsm_pool_num_threads(void) {
  int n = atomic_load(&configured_threads);
  if (n > 0) return n;
  long from_env = positive_env("TSM_NUM_THREADS", 0, TSM_MAX_THREADS);
  n = from_env > 0 ? (int)from_env : cores_available();
  int expected = 0;
  /* A concurrent tsm_set_num_threads wins over the default. */
  if (atomic_compare_exchange_strong(&configured_threads, &expected, n)) {
    atomic_store(&oversubscribed, n > cores_available());
  }
  return atomic_load(&configured_threads);
}

/* ---- waiting ----------------------------------------------------------------------- */

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long spin_budget_ns(void) {
  long long ns = atomic_load_explicit(&spin_ns, memory_order_relaxed);
  if (ns < 0) {
    ns = positive_env("TSM_SPIN_US", TSM_DEFAULT_SPIN_US, 10000000) * 1000LL;
    atomic_store_explicit(&spin_ns, ns, memory_order_relaxed);
  }
  return ns;
}

/* Polls ready(arg) until it holds (returns 1) or the spin budget is spent (returns 0).
 * With more threads than cores it also yields the core after a while, so polling threads
 * do not starve those with work. (Not otherwise: on virtual machines a yield can cost tens
 * of microseconds of latency.) */
static int spin_until(int (*ready)(const void *), const void *arg) {
  long long start = 0, budget = 0;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready(arg)) return 1;
      cpu_relax();
    }
    long long now = now_ns();
    if (start == 0) {
      start = now;
      budget = spin_budget_ns();
    }
    if (now - start >= budget) return 0;
    if (now - start >= 20000 && atomic_load_explicit(&oversubscribed, memory_order_relaxed)) {
      sched_yield();
    }
  }
}

static int new_ticket_or_shutdown(const void *worker) {
  const tsm_worker *w = worker;
  return atomic_load_explicit(&w->ticket, memory_order_acquire) != w->seen ||
         atomic_load_explicit(&pool.shutdown, memory_order_relaxed);
}

static int all_chunks_finished(const void *unused) {
  (void)unused;
  return atomic_load_explicit(&loop.finished, memory_order_acquire) == loop.chunks;
}

/* ---- workers ----------------------------------------------------------------------- */

/* Chunk i of k over [0, n): sizes differ by at most one, and no product can overflow. */
static int64_t chunk_start(int64_t n, int64_t k, int64_t i) {
  int64_t base = n / k, extra = n % k;
  return i * base + (i < extra ? i : extra);
}

static unsigned long long run_word(uint32_t front, uint32_t end) {
  return (unsigned long long)front | ((unsigned long long)end << 32);
}

/* A chunk taken from run r, from its front (its owner) or its back (any other thread);
 * -1 when the run is empty. */
static int64_t take(int r, int from_back) {
  atomic_ullong *run = &loop.runs[r];  /* (r < TSM_MAX_THREADS: one per thread) */
  unsigned long long word = atomic_load_explicit(run, memory_order_acquire);
  for (;;) {
    uint32_t front = (uint32_t)word, end = (uint32_t)(word >> 32);
    if (front >= end) return -1;
    unsigned long long next = from_back ? run_word(front, end - 1) : run_word(front + 1, end);
    if (atomic_compare_exchange_weak_explicit(run, &word, next, memory_order_acq_rel,
                                              memory_order_acquire)) {
      return from_back ? (int64_t)end - 1 : (int64_t)front;
    }
  }
}

/* Runs chunk c of the current loop and counts it finished. */
static void run_chunk(int64_t c) {
  int64_t n = loop.n, chunks = loop.chunks;
  loop.body(loop.closure, chunk_start(n, chunks, c), chunk_start(n, chunks, c + 1));
  if (atomic_fetch_add_explicit(&loop.finished, 1, memory_order_acq_rel) + 1 == chunks) {
    pthread_mutex_lock(&pool.lock);
    pthread_cond_signal(&pool.done);
    pthread_mutex_unlock(&pool.lock);
  }
}

/* Runs thread `own`'s chunks, then whatever the other threads have not started. */
static void run_chunks(int own) {
  int64_t c;
  while ((c = take(own, 0)) >= 0) run_chunk(c);
  int runs = atomic_load_explicit(&loop.num_runs, memory_order_relaxed);
  for (int i = 1; i <= runs; ++i) {
    int r = (own + i) % runs;
    if (r == own) continue;
    while ((c = take(r, 1)) >= 0) run_chunk(c);
  }
}

/* Moves the calling thread off `cpu` if it runs there and may run elsewhere: its
 * affinity without that core for a moment (the kernel migrates it at once), then as it
 * was (it stays where it went). */
static void leave_cpu(int cpu) {
#if defined(__linux__)
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getcpu() != cpu) return;
  cpu_set_t allowed, others;
  if (pthread_getaffinity_np(pthread_self(), sizeof(allowed), &allowed) != 0) return;
  CPU_ZERO(&others);
  CPU_OR(&others, &others, &allowed);
  CPU_CLR(cpu, &others);
  if (CPU_COUNT(&others) == 0) return;
  if (pthread_setaffinity_np(pthread_self(), sizeof(others), &others) == 0) {
    pthread_setaffinity_np(pthread_self(), sizeof(allowed), &allowed);
  }
#else
  (void)cpu;
#endif
}

/* Waits until a chunk is posted to w (returns 1) or the pool shuts down (returns 0). */
static int wait_for_ticket(tsm_worker *w) {
  if (!spin_until(new_ticket_or_shutdown, w)) {
    pthread_mutex_lock(&pool.lock);
    while (!new_ticket_or_shutdown(w)) pthread_cond_wait(&pool.wake, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
  }
  return atomic_load_explicit(&w->ticket, memory_order_acquire) != w->seen;
}

static void *worker_main(void *arg) {
  tsm_worker *w = arg;
  while (wait_for_ticket(w)) {
    w->seen = atomic_load_explicit(&w->ticket, memory_order_acquire);
    leave_cpu(atomic_load_explicit(&pool.caller_cpu, memory_order_relaxed));
    run_chunks(w->slot);
  }
  return NULL;
}

/* In a forked child only the forking thread exists: forget the workers (their memory is
 * leaked, once per fork) and start afresh. */
static void atfork_prepare(void) { pthread_mutex_lock(&pool.lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&pool.lock); }
static void atfork_child(void) {
  pthread_mutex_init(&pool.lock, NULL);
  pthread_cond_init(&pool.wake, NULL);
  pthread_cond_init(&pool.done, NULL);
  pool.workers = NULL;
  pool.num_workers = 0;
  pool.capacity = 0;
  atomic_store(&loop.num_runs, 0);
  atomic_store(&pool.busy, 0);
}

static void register_atfork(void) { pthread_atfork(atfork_prepare, atfork_parent, atfork_child); }

/* Grows the pool to `wanted` workers, as far as the system allows; returns how many there
 * are. Called only by the owner of the pool. */
static int ensure_workers(int wanted) {
  if (pool.num_workers >= wanted) return pool.num_workers;
  pthread_once(&atfork_once, register_atfork);
  pthread_mutex_lock(&pool.lock);
  if (pool.capacity < wanted) {
    tsm_worker **grown = realloc(pool.workers, (size_t)wanted * sizeof(*grown));
    if (grown != NULL) {
      pool.workers = grown;
      pool.capacity = wanted;
    }
  }
  /* Workers must not take the process's signals: block them all while creating. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  while (pool.num_workers < wanted && pool.num_workers < pool.capacity) {
    tsm_worker *w = calloc(1, sizeof(*w));
    if (w == NULL) break;
    atomic_init(&w->ticket, 0);
    w->slot = pool.num_workers + 1;
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
      free(w);
      break;
    }
    pool.workers[pool.num_workers++] = w;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  int have = pool.num_workers;
  pthread_mutex_unlock(&pool.lock);
  return have;
}

/* Stops the workers before the library is unloaded. Loops called afterwards run inline.
 * If a loop still owns the pool (another thread runs a model while the process exits),
 * its workers are left alone: freeing them under it would be worse than the leak. */
__attribute__((destructor)) static void tsm_pool_shutdown(void) {
  atomic_store(&pool.shutdown, 1);
  int expected = 0;
  if (!atomic_compare_exchange_strong(&pool.busy, &expected, 1)) return;
  if (pool.num_workers == 0) return;
  pthread_mutex_lock(&pool.lock);
  pthread_cond_broadcast(&pool.wake);
  int n = pool.num_workers;
  pthread_mutex_unlock(&pool.lock);
  for (int i = 0; i < n; ++i) pthread_join(pool.workers[i]->thread, NULL);
  for (int i = 0; i < n; ++i) free(pool.workers[i]);
  free(pool.workers);
  pool.workers = NULL;
  pool.num_workers = 0;
  pool.capacity = 0;
}

/* ---- the parallel loop ------------------------------------------------------------- */


void tsm_parallel_for(void (*body)(void *closure, int64_t begin, int64_t end), void *closure,
                      int64_t n) {
  if (n <= 0) return;
  int threads = tsm_pool_num_threads();
  int expected = 0;
  if (threads <= 1 || n == 1 || atomic_load_explicit(&pool.shutdown, memory_order_relaxed) ||
      !atomic_compare_exchange_strong_explicit(&pool.busy, &expected, 1, memory_order_acquire,
                                               memory_order_relaxed)) {
    body(closure, 0, n);
    return;
  }

  int participants = n < threads ? (int)n : threads;
  int workers = ensure_workers(participants - 1);
  if (participants > workers + 1) participants = workers + 1;
  int64_t per_thread = n / participants < TSM_CHUNKS_PER_THREAD ? n / participants
                                                                  : TSM_CHUNKS_PER_THREAD;
  int64_t chunks = participants * per_thread;

  loop.body = body;
  loop.closure = closure;
  loop.n = n;
  loop.chunks = chunks;
  atomic_store_explicit(&loop.finished, 0, memory_order_relaxed);
  int stale = atomic_load_explicit(&loop.num_runs, memory_order_relaxed);
  atomic_store_explicit(&loop.num_runs, participants, memory_order_relaxed);
  for (int r = 0; r < participants; ++r) {
    atomic_store_explicit(&loop.runs[r],
                          run_word((uint32_t)(r * per_thread), (uint32_t)((r + 1) * per_thread)),
                          memory_order_release);
  }
  for (int r = participants; r < stale; ++r) {
    atomic_store_explicit(&loop.runs[r], 0, memory_order_release);
  }
#if defined(__linux__)
  atomic_store_explicit(&pool.caller_cpu, sched_getcpu(), memory_order_relaxed);
#endif
  for (int i = 1; i < participants; ++i) {
    atomic_fetch_add_explicit(&pool.workers[i - 1]->ticket, 1, memory_order_release);
  }
  if (participants > 1) {
    pthread_mutex_lock(&pool.lock);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
  }

  run_chunks(0);

  if (!spin_until(all_chunks_finished, NULL)) {
    pthread_mutex_lock(&pool.lock);
    while (!all_chunks_finished(NULL)) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
  }
  atomic_store_explicit(&pool.busy, 0, memory_order_release);
}
