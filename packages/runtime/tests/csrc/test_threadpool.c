/*
 * Checks tsm_parallel_for directly, linked with tsm_threadpool.c:
 *   ./test_threadpool            coverage, balance, nesting, concurrency, fork; prints "ok"
 *   ./test_threadpool threads    prints the default thread count (TSM_NUM_THREADS or cores)
 * Any failure prints "FAIL: ..." and exits 1.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tsm_plan.h"
#include "tsm_threadpool.h"

#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) {                  \
      printf("FAIL: " __VA_ARGS__); \
      printf("\n");                 \
      exit(1);                      \
    }                               \
  } while (0)

typedef struct {
  atomic_int *hits;
  atomic_int calls;
  atomic_llong min_size, max_size;
  atomic_int threads_seen;
} coverage;

static void count_body(void *closure, int64_t begin, int64_t end) {
  coverage *c = closure;
  atomic_fetch_add(&c->calls, 1);
  long long size = end - begin, seen;
  seen = atomic_load(&c->min_size);
  while (size < seen && !atomic_compare_exchange_weak(&c->min_size, &seen, size)) {
  }
  seen = atomic_load(&c->max_size);
  while (size > seen && !atomic_compare_exchange_weak(&c->max_size, &seen, size)) {
  }
  for (int64_t i = begin; i < end; ++i) atomic_fetch_add(&c->hits[i], 1);
}

static void check_coverage(int threads, int64_t n) {
  tsm_pool_set_num_threads(threads);
  coverage c;
  c.hits = calloc((size_t)(n > 0 ? n : 1), sizeof(atomic_int));
  atomic_init(&c.calls, 0);
  atomic_init(&c.min_size, 1LL << 62);
  atomic_init(&c.max_size, 0);
  tsm_parallel_for(count_body, &c, n);
  for (int64_t i = 0; i < n; ++i) {
    CHECK(atomic_load(&c.hits[i]) == 1, "threads=%d n=%lld: index %lld ran %d times", threads,
          (long long)n, (long long)i, atomic_load(&c.hits[i]));
  }
  /* one call on one thread; else up to 4 chunks per thread (TSM_CHUNKS_PER_THREAD),
   * none empty */
  int64_t participants = n == 0 ? 1 : n < threads ? n : threads;
  int64_t per_thread = n / participants < 4 ? n / participants : 4;
  int64_t expected_calls = n == 0 ? 0 : participants <= 1 ? 1 : participants * per_thread;
  CHECK(atomic_load(&c.calls) == expected_calls, "threads=%d n=%lld: %d chunks, expected %lld",
        threads, (long long)n, atomic_load(&c.calls), (long long)expected_calls);
  if (n > 0) {
    CHECK(atomic_load(&c.max_size) - atomic_load(&c.min_size) <= 1,
          "threads=%d n=%lld: unbalanced chunks %lld..%lld", threads, (long long)n,
          atomic_load(&c.min_size), atomic_load(&c.max_size));
  }
  free(c.hits);
}

/* Nested: each outer chunk runs an inner parallel loop (inline, as the pool is busy). */
typedef struct {
  atomic_long total;
} nested;

static void inner_body(void *closure, int64_t begin, int64_t end) {
  atomic_fetch_add(&((nested *)closure)->total, (long)(end - begin));
}

static void outer_body(void *closure, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) tsm_parallel_for(inner_body, closure, 100);
}

/* Concurrent: several threads each run many parallel loops summing 0..n-1. */
typedef struct {
  const int *data;
  atomic_llong sum;
} summing;

static void sum_body(void *closure, int64_t begin, int64_t end) {
  summing *s = closure;
  long long local = 0;
  for (int64_t i = begin; i < end; ++i) local += s->data[i];
  atomic_fetch_add(&s->sum, local);
}

static int data[10000];

static void *concurrent_main(void *arg) {
  (void)arg;
  for (int round = 0; round < 300; ++round) {
    summing s = {data, 0};
    int64_t n = 1 + (round * 37) % 10000;
    tsm_parallel_for(sum_body, &s, n);
    long long expected = (long long)n * (n - 1) / 2;
    if (atomic_load(&s.sum) != expected) return (void *)1;
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "threads") == 0) {
    printf("%d\n", tsm_pool_num_threads());
    return 0;
  }
  for (int i = 0; i < 10000; ++i) data[i] = i;

  int thread_counts[] = {1, 2, 3, 4, 8, 33};
  int64_t sizes[] = {0, 1, 2, 7, 1000, 100003};
  for (size_t t = 0; t < sizeof(thread_counts) / sizeof(*thread_counts); ++t) {
    for (size_t s = 0; s < sizeof(sizes) / sizeof(*sizes); ++s) {
      check_coverage(thread_counts[t], sizes[s]);
    }
  }
  /* Shrinking after growing: the extra workers stay idle. */
  check_coverage(2, 1000);
  check_coverage(33, 1000);

  tsm_pool_set_num_threads(4);
  nested nest = {0};
  tsm_parallel_for(outer_body, &nest, 50);
  CHECK(atomic_load(&nest.total) == 50 * 100, "nested loops covered %ld of 5000",
        atomic_load(&nest.total));

  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) pthread_create(&threads[i], NULL, concurrent_main, NULL);
  for (int i = 0; i < 4; ++i) {
    void *result;
    pthread_join(threads[i], &result);
    CHECK(result == NULL, "concurrent thread %d summed wrong", i);
  }

  /* A forked child (workers exist in the parent) must still run parallel loops. */
  pid_t child = fork();
  CHECK(child >= 0, "fork failed");
  if (child == 0) {
    alarm(20);
    summing s = {data, 0};
    tsm_parallel_for(sum_body, &s, 10000);
    _exit(atomic_load(&s.sum) == 10000LL * 9999 / 2 ? 0 : 3);
  }
  int status = 0;
  waitpid(child, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "forked child failed (status %d)",
        status);

  printf("ok\n");
  return 0;
}
