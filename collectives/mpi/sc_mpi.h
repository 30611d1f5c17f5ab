// Thin C wrappers over what gompi v0.2.0 lacks. Every function returns the
// MPI error code; the communicator is set to MPI_ERRORS_RETURN so codes reach
// Go instead of aborting inside the library.
#include <mpi.h>

int sc_init(int *provided);
int sc_dup_world(MPI_Comm *out);
int sc_rank(MPI_Comm c, int *r);
int sc_size(MPI_Comm c, int *s);
int sc_local_size(MPI_Comm c, int *s);
int sc_split(MPI_Comm c, int color, int key, MPI_Comm *out);
int sc_free(MPI_Comm *c);
int sc_isend(const void *buf, int n, int dst, int tag, MPI_Comm c, MPI_Request *req);
int sc_irecv(void *buf, int n, int src, int tag, MPI_Comm c, MPI_Request *req);
void sc_set_nap(long ns);
int sc_waitall(int n, MPI_Request *reqs, int *counts);
int sc_test(MPI_Request *req, int *flag, int *count);
int sc_progress(MPI_Comm c);
int sc_barrier(MPI_Comm c);
int sc_bcast(void *buf, int n, int root, MPI_Comm c);
int sc_allreduce_sum(float *buf, int n, MPI_Comm c);
int sc_allgatherv(const void *send, int n, void *recv, const int *counts, const int *displs, MPI_Comm c);
int sc_alltoallv(const void *send, const int *sc, const int *sd, void *recv, const int *rc, const int *rd, MPI_Comm c);
void sc_abort(MPI_Comm c, int code);
void sc_error_string(int code, char *buf, int len);
