// The emulator's C interface, for cgo.
#ifndef ORTHONET_EMU_C_H
#define ORTHONET_EMU_C_H
#ifdef __cplusplus
extern "C" {
#endif
int emu_launch(const char *name, int grid, int threads, const void *args, long long words);
void emu_gemm(int f64, int ta, int tb, long long m, long long n, long long k, double alpha, unsigned long long a,
              long long lda, long long sa, unsigned long long b, long long ldb, long long sb, double beta, unsigned long long c,
              long long ldc, long long sc, long long batch);
void emu_potrf(int f64, long long n, unsigned long long a, unsigned long long info);
void emu_trsm(int f64, long long m, long long n, unsigned long long a, unsigned long long b);
#ifdef __cplusplus
}
#endif
#endif
