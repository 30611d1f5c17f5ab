#include "sc_mpi.h"

#include <time.h>

int sc_init(int *provided) {
  int on = 0;
  MPI_Initialized(&on);
  if (on) { MPI_Query_thread(provided); return MPI_SUCCESS; }
  // FUNNELED: all MPI calls come from one locked OS thread (see mpi.go).
  return MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, provided);
}

int sc_dup_world(MPI_Comm *out) {
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, out);
  if (rc != MPI_SUCCESS) return rc;
  return MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
}

int sc_split(MPI_Comm c, int color, int key, MPI_Comm *out) {
  int rc = MPI_Comm_split(c, color, key, out);
  if (rc != MPI_SUCCESS) return rc;
  return MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
}
int sc_free(MPI_Comm *c) { return MPI_Comm_free(c); }

int sc_rank(MPI_Comm c, int *r) { return MPI_Comm_rank(c, r); }
int sc_size(MPI_Comm c, int *s) { return MPI_Comm_size(c, s); }

// Ranks sharing this node: what the CPU cores are divided among.
int sc_local_size(MPI_Comm c, int *s) {
  MPI_Comm node;
  int rc = MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS) return rc;
  rc = MPI_Comm_size(node, s);
  MPI_Comm_free(&node);
  return rc;
}

// Point to point and every collective but the float sum move bytes: the Go
// side sends float32, int32 and int64 slices as their memory.
int sc_isend(const void *buf, int n, int dst, int tag, MPI_Comm c, MPI_Request *req) {
  return MPI_Isend(buf, n, MPI_BYTE, dst, tag, c, req);
}
int sc_irecv(void *buf, int n, int src, int tag, MPI_Comm c, MPI_Request *req) {
  return MPI_Irecv(buf, n, MPI_BYTE, src, tag, c, req);
}
// sc_test completes the request if it is done (*flag 1, *count set) and
// leaves it in flight otherwise: a caller may then sleep instead of
// spinning in MPI_Wait.
int sc_test(MPI_Request *req, int *flag, int *count) {
  MPI_Status st;
  int rc = MPI_Test(req, flag, &st);
  if (rc != MPI_SUCCESS || !*flag) return rc;
  *count = -1;
  return MPI_Get_count(&st, MPI_BYTE, count);
}
// sc_progress lets MPI move what is in flight: a probe runs its progress
// engine and consumes nothing.
int sc_progress(MPI_Comm c) {
  int flag;
  return MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &flag, MPI_STATUS_IGNORE);
}
// How the MPI thread waits, chosen once (sc_set_nap) before the calls that
// wait: spin inside MPI's blocking calls, the least latency where each
// rank has a core; or test and nap, where ranks outnumber the cores and a
// rank spinning in MPI would hold a core the peer it waits for needs.
static long nap_ns;

// finish_spin waits for n requests in MPI_Wait, each in turn; finish_nap
// tests those not done and sleeps nap_ns between rounds. Both complete
// every request, past a failed one, set counts[i] (bytes of a receive) and
// return the first error.
static int finish_spin(int n, MPI_Request *reqs, int *counts) {
  int first = MPI_SUCCESS;
  for (int i = 0; i < n; i++) {
    MPI_Status st;
    counts[i] = -1;
    int rc = MPI_Wait(&reqs[i], &st);
    if (rc == MPI_SUCCESS) rc = MPI_Get_count(&st, MPI_BYTE, &counts[i]);
    if (rc != MPI_SUCCESS && first == MPI_SUCCESS) first = rc;
  }
  return first;
}

static int finish_nap(int n, MPI_Request *reqs, int *counts) {
  int first = MPI_SUCCESS, from = 0;
  struct timespec nap = {nap_ns / 1000000000L, nap_ns % 1000000000L};
  for (int i = 0; i < n; i++) counts[i] = -1;
  for (;;) {
    // Requests before from are done; a test completes one (or fails it,
    // which frees it too) and MPI_Test on a null request says done.
    while (from < n) {
      MPI_Status st;
      int flag = 0, rc = MPI_Test(&reqs[from], &flag, &st);
      if (rc == MPI_SUCCESS && !flag) break;
      if (rc == MPI_SUCCESS) rc = MPI_Get_count(&st, MPI_BYTE, &counts[from]);
      if (rc != MPI_SUCCESS && first == MPI_SUCCESS) first = rc;
      from++;
    }
    if (from == n) return first;
    nanosleep(&nap, NULL);
  }
}

// The collectives: blocking ones when spinning (OpenMPI's tuned
// algorithms), nonblocking ones finished by finish_nap when napping.
// A table chosen once, not a test of the policy in each call.
struct colls {
  int (*barrier)(MPI_Comm);
  int (*bcast)(void *, int, int, MPI_Comm);
  int (*allreduce)(float *, int, MPI_Comm);
  int (*allgatherv)(const void *, int, void *, const int *, const int *, MPI_Comm);
  int (*alltoallv)(const void *, const int *, const int *, void *, const int *, const int *, MPI_Comm);
};

// one finishes the collective a nonblocking call started (rc its code).
static int one(MPI_Request *r, int rc) {
  int count;
  return rc != MPI_SUCCESS ? rc : finish_nap(1, r, &count);
}

static int barrier_spin(MPI_Comm c) { return MPI_Barrier(c); }
static int bcast_spin(void *buf, int n, int root, MPI_Comm c) { return MPI_Bcast(buf, n, MPI_BYTE, root, c); }
static int allreduce_spin(float *buf, int n, MPI_Comm c) {
  return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, c);
}
static int allgatherv_spin(const void *send, int n, void *recv, const int *counts, const int *displs, MPI_Comm c) {
  return MPI_Allgatherv(send, n, MPI_BYTE, recv, counts, displs, MPI_BYTE, c);
}
static int alltoallv_spin(const void *send, const int *sc, const int *sd, void *recv, const int *rc, const int *rd, MPI_Comm c) {
  return MPI_Alltoallv(send, sc, sd, MPI_BYTE, recv, rc, rd, MPI_BYTE, c);
}

static int barrier_nap(MPI_Comm c) {
  MPI_Request r;
  int rc = MPI_Ibarrier(c, &r);
  return one(&r, rc);
}
static int bcast_nap(void *buf, int n, int root, MPI_Comm c) {
  MPI_Request r;
  int rc = MPI_Ibcast(buf, n, MPI_BYTE, root, c, &r);
  return one(&r, rc);
}
static int allreduce_nap(float *buf, int n, MPI_Comm c) {
  MPI_Request r;
  int rc = MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, c, &r);
  return one(&r, rc);
}
static int allgatherv_nap(const void *send, int n, void *recv, const int *counts, const int *displs, MPI_Comm c) {
  MPI_Request r;
  int rc = MPI_Iallgatherv(send, n, MPI_BYTE, recv, counts, displs, MPI_BYTE, c, &r);
  return one(&r, rc);
}
static int alltoallv_nap(const void *send, const int *sc, const int *sd, void *recv, const int *rcs, const int *rd, MPI_Comm c) {
  MPI_Request r;
  int rc = MPI_Ialltoallv(send, sc, sd, MPI_BYTE, recv, rcs, rd, MPI_BYTE, c, &r);
  return one(&r, rc);
}

static const struct colls spin = {barrier_spin, bcast_spin, allreduce_spin, allgatherv_spin, alltoallv_spin};
static const struct colls nap = {barrier_nap, bcast_nap, allreduce_nap, allgatherv_nap, alltoallv_nap};

static int (*finish)(int, MPI_Request *, int *) = finish_spin;
static const struct colls *colls = &spin;

void sc_set_nap(long ns) {
  nap_ns = ns;
  finish = ns > 0 ? finish_nap : finish_spin;
  colls = ns > 0 ? &nap : &spin;
}

int sc_waitall(int n, MPI_Request *reqs, int *counts) { return finish(n, reqs, counts); }
int sc_barrier(MPI_Comm c) { return colls->barrier(c); }
int sc_bcast(void *buf, int n, int root, MPI_Comm c) { return colls->bcast(buf, n, root, c); }
int sc_allreduce_sum(float *buf, int n, MPI_Comm c) { return colls->allreduce(buf, n, c); }
int sc_allgatherv(const void *send, int n, void *recv, const int *counts, const int *displs, MPI_Comm c) {
  return colls->allgatherv(send, n, recv, counts, displs, c);
}
int sc_alltoallv(const void *send, const int *sc, const int *sd, void *recv, const int *rc, const int *rd, MPI_Comm c) {
  return colls->alltoallv(send, sc, sd, recv, rc, rd, c);
}
void sc_abort(MPI_Comm c, int code) { MPI_Abort(c, code); }
void sc_error_string(int code, char *buf, int len) {
  int n = 0;
  if (MPI_Error_string(code, buf, &n) != MPI_SUCCESS || n >= len) { buf[0] = 0; return; }
  buf[n] = 0;
}
