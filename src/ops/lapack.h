/* lapack.h - private to src/ops: the LAPACK routines lapack.c calls, declared by hand with
 * the Fortran calling convention of the serial OpenBLAS tgraph links (CMakeLists.txt),
 * which exports them.
 *
 * Neither LAPACKE nor the system's liblapack.so.3 is used: the first is one more library
 * for a thin layer, and the second would load the threaded OpenBLAS beside the serial one.
 *
 * The convention: every argument by address; matrices column-major with a leading
 * dimension; integers are LAPACK's default 32-bit INTEGER (OpenBLAS's LP64 build, the one
 * Debian ships; an ILP64 build would need int64_t here); each CHARACTER argument adds a
 * hidden length, passed by value after all the others (gfortran's convention: size_t).
 * OpenBLAS's own C implementations (potrf, getrf, trtrs, ...) ignore those lengths; its
 * Fortran ones (syevd, getri, ...) read them.
 */
#ifndef TG_OPS_LAPACK_H
#define TG_OPS_LAPACK_H

#include <stddef.h>

typedef int tg_lapack_int; /* LAPACK's INTEGER */

/* Cholesky factorization of a symmetric positive definite matrix (the `uplo` triangle). */
void spotrf_(const char *uplo, const tg_lapack_int *n, float *a, const tg_lapack_int *lda,
             tg_lapack_int *info, size_t uplo_len);
void dpotrf_(const char *uplo, const tg_lapack_int *n, double *a, const tg_lapack_int *lda,
             tg_lapack_int *info, size_t uplo_len);

/* Solves A X = B, A = U^T U or L L^T, given the factor from ?potrf. */
void spotrs_(const char *uplo, const tg_lapack_int *n, const tg_lapack_int *nrhs, const float *a,
             const tg_lapack_int *lda, float *b, const tg_lapack_int *ldb, tg_lapack_int *info,
             size_t uplo_len);
void dpotrs_(const char *uplo, const tg_lapack_int *n, const tg_lapack_int *nrhs, const double *a,
             const tg_lapack_int *lda, double *b, const tg_lapack_int *ldb, tg_lapack_int *info,
             size_t uplo_len);

/* Solves op(A) X = B for a triangular A; info > 0: A(info,info) is exactly zero. */
void strtrs_(const char *uplo, const char *trans, const char *diag, const tg_lapack_int *n,
             const tg_lapack_int *nrhs, const float *a, const tg_lapack_int *lda, float *b,
             const tg_lapack_int *ldb, tg_lapack_int *info, size_t uplo_len, size_t trans_len,
             size_t diag_len);
void dtrtrs_(const char *uplo, const char *trans, const char *diag, const tg_lapack_int *n,
             const tg_lapack_int *nrhs, const double *a, const tg_lapack_int *lda, double *b,
             const tg_lapack_int *ldb, tg_lapack_int *info, size_t uplo_len, size_t trans_len,
             size_t diag_len);

/* Solves A X = B by LU factorization with partial pivoting; info > 0: U(info,info) is
 * exactly zero (nothing solved). */
void sgesv_(const tg_lapack_int *n, const tg_lapack_int *nrhs, float *a, const tg_lapack_int *lda,
            tg_lapack_int *ipiv, float *b, const tg_lapack_int *ldb, tg_lapack_int *info);
void dgesv_(const tg_lapack_int *n, const tg_lapack_int *nrhs, double *a, const tg_lapack_int *lda,
            tg_lapack_int *ipiv, double *b, const tg_lapack_int *ldb, tg_lapack_int *info);

/* LU factorization P A = L U (1-based pivots); info > 0: U(info,info) is exactly zero, the
 * factorization still complete. */
void sgetrf_(const tg_lapack_int *m, const tg_lapack_int *n, float *a, const tg_lapack_int *lda,
             tg_lapack_int *ipiv, tg_lapack_int *info);
void dgetrf_(const tg_lapack_int *m, const tg_lapack_int *n, double *a, const tg_lapack_int *lda,
             tg_lapack_int *ipiv, tg_lapack_int *info);

/* Solves op(A) X = B from ?getrf's factors (trans 'N' or 'T'). */
void sgetrs_(const char *trans, const tg_lapack_int *n, const tg_lapack_int *nrhs, const float *a,
             const tg_lapack_int *lda, const tg_lapack_int *ipiv, float *b,
             const tg_lapack_int *ldb, tg_lapack_int *info, size_t trans_len);
void dgetrs_(const char *trans, const tg_lapack_int *n, const tg_lapack_int *nrhs, const double *a,
             const tg_lapack_int *lda, const tg_lapack_int *ipiv, double *b,
             const tg_lapack_int *ldb, tg_lapack_int *info, size_t trans_len);

/* The inverse from ?getrf's factors; lwork = -1 asks for the best workspace in work[0]. */
void sgetri_(const tg_lapack_int *n, float *a, const tg_lapack_int *lda, const tg_lapack_int *ipiv,
             float *work, const tg_lapack_int *lwork, tg_lapack_int *info);
void dgetri_(const tg_lapack_int *n, double *a, const tg_lapack_int *lda, const tg_lapack_int *ipiv,
             double *work, const tg_lapack_int *lwork, tg_lapack_int *info);

/* Eigenvalues (ascending) and eigenvectors of a symmetric matrix, divide and conquer;
 * lwork = liwork = -1 asks for the workspace sizes in work[0] and iwork[0]; info > 0: the
 * algorithm did not converge. */
void ssyevd_(const char *jobz, const char *uplo, const tg_lapack_int *n, float *a,
             const tg_lapack_int *lda, float *w, float *work, const tg_lapack_int *lwork,
             tg_lapack_int *iwork, const tg_lapack_int *liwork, tg_lapack_int *info,
             size_t jobz_len, size_t uplo_len);
void dsyevd_(const char *jobz, const char *uplo, const tg_lapack_int *n, double *a,
             const tg_lapack_int *lda, double *w, double *work, const tg_lapack_int *lwork,
             tg_lapack_int *iwork, const tg_lapack_int *liwork, tg_lapack_int *info,
             size_t jobz_len, size_t uplo_len);

#endif
