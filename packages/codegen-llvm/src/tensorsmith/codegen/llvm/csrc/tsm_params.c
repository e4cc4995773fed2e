/*
 * tsm_params.c -- maps the weights of a CPU artifact from the file the library was loaded
 * from.
 *
 * Why they are not linked into the library: linking copied them three times (assembling
 * them into an object, linking that into the library, hashing the library), about 3 s of
 * GPT-2's 420 MB. The artifact file is instead [library][padding]["params" section: the
 * weights, starting at a multiple of TSM_PARAMS_ALIGN]["params.id" section: the 16 bytes
 * of tsm_graph_plan.params_id][metadata][footer] (docs/artifact.md). The dynamic loader
 * ignores what follows the library.
 *
 * When the library is loaded, a constructor finds the file (the loaded object that holds
 * tsm_graph_plan), reads its footer, checks that the 16 bytes before the metadata are this
 * plan's id (a file replaced after loading, or a library copied without its tail, is
 * refused rather than run with weights of another build), and maps the weights read-only.
 * Reading the file then, not at tsm_model_create, matters: the Python runtime loads the
 * artifact through the descriptor it verified it from (/proc/self/fd/N), a path that is
 * only sure to name that file while the library is being loaded.
 */
#define _GNU_SOURCE

#include "tsm_params.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FOOTER_BYTES 32 /* magic[8], u32 version, u32 reserved, u64 meta offset, u64 length */
#define ID_BYTES ((int)sizeof tsm_graph_plan.params_id)

static const unsigned char *params_base;
static size_t params_mapped;
static char params_error[1024] = "the weights were not mapped (the library's constructor did "
                                 "not run)";
static const unsigned char no_params[64];

const unsigned char *tsm_params(const char **why) {
  if (why != NULL) *why = params_error;
  return params_base;
}

/* Finds the path of the loaded object that contains `address`. */
typedef struct {
  uintptr_t address;
  char path[4096];
} lookup;

static int holds_address(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  lookup *l = data;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && l->address >= start && l->address < start + ph->p_memsz) {
      snprintf(l->path, sizeof(l->path), "%s", info->dlpi_name ? info->dlpi_name : "");
      return 1;
    }
  }
  return 0;
}

static uint64_t little_endian(const unsigned char *p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

/* Maps the weights of the artifact at `path`; returns 0, or -1 with params_error set. */
static int map_from(const char *path, const tsm_plan *plan) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(params_error, sizeof(params_error),
             "cannot open the artifact '%s' to map its weights: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  unsigned char footer[FOOTER_BYTES], id[ID_BYTES];
  uint64_t size = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
  uint64_t meta = 0, weights = (uint64_t)plan->params_bytes;
  int ok = size >= FOOTER_BYTES &&
           pread(fd, footer, FOOTER_BYTES, (off_t)(size - FOOTER_BYTES)) == FOOTER_BYTES &&
           memcmp(footer, "TSMART\0\0", 8) == 0;
  if (ok) {
    meta = little_endian(footer + 16, 8);
    ok = meta >= weights + ID_BYTES && meta <= size &&
         pread(fd, id, ID_BYTES, (off_t)(meta - ID_BYTES)) == ID_BYTES &&
         memcmp(id, plan->params_id, ID_BYTES) == 0;
  }
  if (!ok) {
    close(fd);
    snprintf(params_error, sizeof(params_error),
             "the artifact '%s' does not end with this library's weights (the library was "
             "copied without the rest of the artifact file, or the file was replaced after it "
             "was loaded); copy the whole artifact again, or re-export it",
             path);
    return -1;
  }
  uint64_t offset = meta - ID_BYTES - weights;
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || offset % (uint64_t)page != 0) {
    close(fd);
    snprintf(params_error, sizeof(params_error),
             "the weights in the artifact '%s' start at byte %llu, not at a page boundary of "
             "this machine (%ld bytes); re-export the artifact",
             path, (unsigned long long)offset, page);
    return -1;
  }
  void *p = mmap(NULL, (size_t)weights, PROT_READ, MAP_PRIVATE, fd, (off_t)offset);
  int saved = errno;
  close(fd);  /* the mapping stays */
  if (p == MAP_FAILED) {
    snprintf(params_error, sizeof(params_error), "cannot map the %llu bytes of weights of '%s': %s",
             (unsigned long long)weights, path, strerror(saved));
    return -1;
  }
  params_base = p;
  params_mapped = (size_t)weights;
  return 0;
}

__attribute__((constructor)) static void tsm_map_params(void) {
  const tsm_plan *plan = &tsm_graph_plan;
  if (plan->params_bytes <= 0) {
    params_base = no_params;
    return;
  }
  lookup l = {(uintptr_t)plan, ""};
  if (!dl_iterate_phdr(holds_address, &l) || l.path[0] == '\0') {
    snprintf(params_error, sizeof(params_error),
             "cannot find the artifact file this library was loaded from, to map its weights; "
             "load the artifact itself with dlopen() (it cannot be linked into a program)");
    return;
  }
  map_from(l.path, plan);
}

__attribute__((destructor)) static void tsm_unmap_params(void) {
  if (params_mapped > 0) munmap((void *)(uintptr_t)params_base, params_mapped);
  params_base = NULL;
  params_mapped = 0;
}
