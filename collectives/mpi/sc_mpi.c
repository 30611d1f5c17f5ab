#include "sc_mpi.h"

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
int sc_wait(MPI_Request *req, int *count) {
  MPI_Status st;
  int rc = MPI_Wait(req, &st);
  if (rc != MPI_SUCCESS) return rc;
  *count = -1;
  return MPI_Get_count(&st, MPI_BYTE, count);
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
int sc_barrier(MPI_Comm c) { return MPI_Barrier(c); }
int sc_bcast(void *buf, int n, int root, MPI_Comm c) { return MPI_Bcast(buf, n, MPI_BYTE, root, c); }
int sc_allreduce_sum(float *buf, int n, MPI_Comm c) {
  return MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, c);
}
int sc_allgatherv(const void *send, int n, void *recv, const int *counts, const int *displs, MPI_Comm c) {
  return MPI_Allgatherv(send, n, MPI_BYTE, recv, counts, displs, MPI_BYTE, c);
}
int sc_alltoallv(const void *send, const int *sc, const int *sd, void *recv, const int *rc, const int *rd, MPI_Comm c) {
  return MPI_Alltoallv(send, sc, sd, MPI_BYTE, recv, rc, rd, MPI_BYTE, c);
}
void sc_abort(MPI_Comm c, int code) { MPI_Abort(c, code); }
void sc_error_string(int code, char *buf, int len) {
  int n = 0;
  if (MPI_Error_string(code, buf, &n) != MPI_SUCCESS || n >= len) { buf[0] = 0; return; }
  buf[n] = 0;
}
