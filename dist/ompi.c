//go:build cgo

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "ompi.h"

// resolve sets *dst to the address of name in lib, or writes why not.
static int resolve(void *lib, const char *name, void **dst, char *err, size_t errlen) {
	*dst = dlsym(lib, name);
	if (*dst == NULL) {
		snprintf(err, errlen, "it has no symbol %s (not Open MPI? MPICH's ABI is not supported)", name);
		return 1;
	}
	return 0;
}

int ompi_load(ompi_api *m, const char *path, char *err, size_t errlen) {
	memset(m, 0, sizeof *m);
	m->lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (m->lib == NULL) {
		const char *e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return 1;
	}
	struct {
		const char *name;
		void **dst;
	} syms[] = {
		{"MPI_Init_thread", (void **)&m->init_thread},
		{"MPI_Initialized", (void **)&m->initialized},
		{"MPI_Finalize", (void **)&m->finalize},
		{"MPI_Comm_rank", (void **)&m->comm_rank},
		{"MPI_Comm_size", (void **)&m->comm_size},
		{"MPI_Comm_set_errhandler", (void **)&m->comm_set_errhandler},
		{"MPI_Allreduce", (void **)&m->allreduce},
		{"MPI_Bcast", (void **)&m->bcast},
		{"MPI_Barrier", (void **)&m->barrier},
		{"MPI_Abort", (void **)&m->abort},
		{"MPI_Error_string", (void **)&m->error_string},
		{"ompi_mpi_comm_world", &m->comm_world},
		{"ompi_mpi_float", &m->float32},
		{"ompi_mpi_double", &m->float64},
		{"ompi_mpi_byte", &m->byte},
		{"ompi_mpi_int64_t", &m->int64},
		{"ompi_mpi_op_sum", &m->sum},
		{"ompi_mpi_op_max", &m->max},
		{"ompi_mpi_errors_return", &m->errors_return},
	};
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		if (resolve(m->lib, syms[i].name, syms[i].dst, err, errlen) != 0) {
			return 1;
		}
	}
	return 0;
}

int ompi_init(ompi_api *m, int *provided) {
	int flag = 0;
	int rc = m->initialized(&flag);
	if (rc != 0) {
		return rc;
	}
	if (flag) {
		return -1; // started by someone else: not ours to finalize
	}
	rc = m->init_thread(NULL, NULL, OMPI_THREAD_FUNNELED, provided);
	if (rc != 0) {
		return rc;
	}
	return m->comm_set_errhandler(m->comm_world, m->errors_return);
}

int ompi_rank_size(ompi_api *m, int *rank, int *size) {
	int rc = m->comm_rank(m->comm_world, rank);
	return rc != 0 ? rc : m->comm_size(m->comm_world, size);
}

int ompi_finalize(ompi_api *m) { return m->finalize(); }

int ompi_barrier(ompi_api *m) { return m->barrier(m->comm_world); }

int ompi_abort(ompi_api *m, int code) { return m->abort(m->comm_world, code); }

int ompi_allreduce_sum(ompi_api *m, void *buf, int n, ompi_handle type) {
	return m->allreduce(OMPI_IN_PLACE, buf, n, type, m->sum, m->comm_world);
}

int ompi_allreduce_max_int64(ompi_api *m, void *buf, int n) {
	return m->allreduce(OMPI_IN_PLACE, buf, n, m->int64, m->max, m->comm_world);
}

int ompi_bcast(ompi_api *m, void *buf, int n, ompi_handle type, int root) {
	return m->bcast(buf, n, type, root, m->comm_world);
}

int ompi_error_string(ompi_api *m, int code, char *s) {
	int len = 0;
	if (m->error_string(code, s, &len) != 0 || len <= 0 || len >= OMPI_MAX_ERROR_STRING) {
		snprintf(s, OMPI_MAX_ERROR_STRING, "MPI error %d", code);
	}
	return 0;
}
