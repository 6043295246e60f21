// The part of Open MPI's C API that package dist calls, declared here so
// that the package builds without mpi.h: libmpi.so.40 is opened with dlopen
// and every function and predefined handle is read with dlsym. In Open
// MPI's ABI every handle (MPI_Comm, MPI_Datatype, MPI_Op, MPI_Errhandler)
// is a pointer, and a predefined handle such as MPI_COMM_WORLD is the
// address of a global (ompi_mpi_comm_world).
#ifndef ORTHONET_DIST_OMPI_H
#define ORTHONET_DIST_OMPI_H

#include <stddef.h>

typedef void *ompi_handle;

typedef struct {
	void *lib; // dlopen's handle

	int (*init_thread)(int *argc, char ***argv, int required, int *provided);
	int (*initialized)(int *flag);
	int (*finalize)(void);
	int (*comm_rank)(ompi_handle comm, int *rank);
	int (*comm_size)(ompi_handle comm, int *size);
	int (*comm_set_errhandler)(ompi_handle comm, ompi_handle errhandler);
	int (*allreduce)(const void *send, void *recv, int count, ompi_handle type, ompi_handle op, ompi_handle comm);
	int (*bcast)(void *buf, int count, ompi_handle type, int root, ompi_handle comm);
	int (*barrier)(ompi_handle comm);
	int (*abort)(ompi_handle comm, int code);
	int (*error_string)(int code, char *s, int *len);

	ompi_handle comm_world;
	ompi_handle float32, float64, byte, int64;
	ompi_handle sum, max;
	ompi_handle errors_return;
} ompi_api;

// MPI_IN_PLACE, MPI_THREAD_FUNNELED and MPI_MAX_ERROR_STRING in Open MPI's mpi.h.
#define OMPI_IN_PLACE ((void *)1)
#define OMPI_THREAD_FUNNELED 1
#define OMPI_MAX_ERROR_STRING 256

// ompi_load opens the library at path (RTLD_GLOBAL: Open MPI's own plugins
// resolve their symbols in it) and fills m. On failure it returns non-zero
// and writes the reason into err.
int ompi_load(ompi_api *m, const char *path, char *err, size_t errlen);

int ompi_init(ompi_api *m, int *provided);
int ompi_rank_size(ompi_api *m, int *rank, int *size);
int ompi_finalize(ompi_api *m);
int ompi_barrier(ompi_api *m);
int ompi_abort(ompi_api *m, int code);
int ompi_allreduce_sum(ompi_api *m, void *buf, int n, ompi_handle type);
int ompi_allreduce_max_int64(ompi_api *m, void *buf, int n);
int ompi_bcast(ompi_api *m, void *buf, int n, ompi_handle type, int root);
int ompi_error_string(ompi_api *m, int code, char *s);

#endif
