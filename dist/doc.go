// Package dist is the communicator of data-parallel training: the ranks of
// a group (processes started by mpirun, or goroutines in one process) sum
// buffers across the group, broadcast from one rank to the rest and wait
// for each other.
//
// Three implementations stand behind the one Communicator interface:
//
//   - NewSingle: one rank; a sum is the identity. Training uses it unless
//     told otherwise.
//   - NewLocal: N ranks as goroutines of one process, for fast tests of the
//     code that uses the interface.
//   - OpenMPI: the processes of `mpirun -np N prog`, over Open MPI.
//
// # How the MPI code is built
//
// OpenMPI loads Open MPI's libmpi.so.40 with dlopen when it is called, as
// backend/cuda loads the NVIDIA libraries; nothing of MPI is linked. So a
// plain `go build` needs neither mpi.h nor libmpi, the binary runs single
// process on a machine without Open MPI, and the same binary runs under
// mpirun where Open MPI is installed: no build tag to remember and no second
// binary to ship. The cost is that dist declares the few MPI functions it
// calls itself, and that a handle such as MPI_COMM_WORLD or MPI_FLOAT, which
// Open MPI's mpi.h defines as the address of a global (ompi_mpi_comm_world,
// ompi_mpi_float), is read with dlsym: this ties the package to Open MPI's
// ABI (libmpi.so.40 is the soname of Open MPI 4 and 5; 4.1.4 was tried),
// not to MPICH's, whose handles are integer constants. A build without cgo has no
// dlopen; there OpenMPI returns an error saying so.
//
// # Contract and faults
//
// Every rank makes the same collective calls in the same order, with
// buffers of the same length and the same root: the contract of MPI's
// collectives. NewLocal checks it on every call (it costs nothing there);
// OpenMPI checks it when MPIOptions.Check is set (one small extra all-reduce
// per call), and otherwise a mismatch is undefined (MPI may fail, truncate
// or wait for ever).
//
// A rank that fails must not leave the others waiting: after any error it
// calls Abort, which ends the whole group. Under mpirun, Abort is MPI_Abort
// and ends every process of the job with a non-zero exit; so does a rank
// that exits without Close (a crash, a signal, os.Exit), which mpirun sees
// and answers by killing the rest. MPI's errors are returned, not fatal
// (MPI_ERRORS_RETURN), so that the error is named by orthonet; a
// communicator that had an MPI error refuses every later call, and its Close
// aborts the job instead of waiting in MPI_Finalize for ranks that may be
// stuck in the failed call. In-process, Abort makes every waiting and later
// call on every rank return an error wrapping ErrAborted and the cause, and
// NewLocal's timeout turns a rank that never arrives into ErrTimeout on all.
//
// # Training over it
//
// optim's Solver takes a Communicator in optim.Options.Comm (optim declares
// the four methods it needs, which every communicator here has). Each rank
// steps on its shard of every global batch; the Solver sums, in one call
// per element type and before any parameter moves, RSDM's r x r matrix
// P G (PX)^T of each weight (every rank draws the same rows), the full
// gradients of the other rules and of the unconstrained parameters, and a
// flag per rank that fails the step on all ranks when one failed. It
// divides the sums by Size (equal shards: their means' mean is the batch's
// mean) and compares a checksum of the weights every
// optim.Options.ChecksumEvery steps. TestMPISolver runs it under mpirun.
//
// # Later: NCCL
//
// The interface holds no MPI type: buffers are plain slices and roots are
// ranks, so NCCL (libnccl.so.2, loaded at run time as the CUDA libraries
// are) can implement it. Its communicator would be made by ncclCommInitRank
// from a unique id that rank 0 creates and sends to the others with
// BroadcastBytes over MPI; device buffers would come as a second interface,
// an all-reduce of device memory enqueued on the backend's stream, which a
// caller finds with a type assertion as io.WriterTo is found.
package dist
